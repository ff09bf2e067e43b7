// The per-turn reads go out as named statements, planned once per connection (src/db/prepared-statements.ts).
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type TestApp, createTestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  // One connection, so the statements the reads prepared are the ones this test's query sees.
  t = await createTestApp({ poolMax: 1 });
});
afterAll(async () => t.close());

it('prepares describe and the context read once on the connection and reuses them', async () => {
  const base = `/v1/spaces/${t.account.defaultSpaceId}/users/u-1/sessions`;
  const created = await t.request({ method: 'POST', url: base, payload: { sessionId: 's-1' } });
  expect(created.statusCode).toBe(201);
  for (let i = 0; i < 3; i++) {
    expect((await t.request({ method: 'GET', url: `${base}/s-1` })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url: `${base}/s-1/context` })).statusCode).toBe(200);
  }
  const { rows } = await sql<{ name: string }>`SELECT name FROM pg_prepared_statements ORDER BY name`.execute(t.db);
  expect(rows.map((row) => row.name)).toEqual(['describe_session', 'read_context']);
});
