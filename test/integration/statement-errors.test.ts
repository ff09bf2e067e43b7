// A statement the server refuses (a constraint, a PL/pgSQL RAISE the append answers as 409 or 413)
// leaves its connection idle and in the pool. pg answers the error at the server's ErrorResponse,
// before the ReadyForQuery behind it; the embedded database's socket server, on its own thread,
// writes the two apart, and the pool then saw a busy connection and closed it, so the next
// statement met a closed socket (EPIPE, answered 503) on every refused append.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

let database: TestDatabase;
let connectionsOpened = 0;

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 1 });
  database.pool.on('connect', () => connectionsOpened++);
});

afterAll(async () => {
  await database.dispose();
});

it('keeps the connection through refused statements: each next statement is answered on it', async () => {
  expect((await sql<{ one: number }>`SELECT 1 AS one`.execute(database.db)).rows).toEqual([{ one: 1 }]);
  const opened = connectionsOpened;
  for (let i = 0; i < 20; i++) {
    const refused = i % 2 === 0 ? sql`SELECT 1 / 0` : sql`DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'AS409', MESSAGE = 'refused'; END $$`;
    await expect(refused.execute(database.db)).rejects.toMatchObject({ code: i % 2 === 0 ? '22012' : 'AS409' });
    expect((await sql<{ n: number }>`SELECT ${i}::int AS n`.execute(database.db)).rows).toEqual([{ n: i }]);
  }
  expect(connectionsOpened - opened).toBe(0);
});
