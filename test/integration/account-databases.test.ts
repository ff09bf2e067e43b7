// The database as one account's (src/db/connect.ts accountDatabasesOf): what a request's handlers query
// through (request.db), so that its checkouts count against its account's share of the pool
// (src/db/fair-pool.ts). The account is passed, not carried in AsyncLocalStorage (bench/README.md).
import { Kysely, PostgresDialect, sql } from 'kysely';
import type { DB } from '../../src/db/schema.js';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { ACCOUNT_HANDLES_KEPT, type AccountDatabases, accountDatabasesOf } from '../../src/db/connect.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const opened: TestDatabase[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((database) => database.dispose()));
});

/** A test database, and the database as each account's. */
async function open(options: Parameters<typeof createTestDatabase>[0] = {}): Promise<TestDatabase & { forAccount: AccountDatabases }> {
  const database = await createTestDatabase(options);
  opened.push(database);
  return { ...database, forAccount: accountDatabasesOf(database.db) };
}

describe('the database as one account', () => {
  it('is one handle per account, kept, registered for the handle\'s db by openDatabase', async () => {
    const database = await open();
    const a = database.forAccount('acct-a');
    expect(database.forAccount('acct-a')).toBe(a);
    expect(database.forAccount('acct-b')).not.toBe(a);
    expect(a).not.toBe(database.db);
    // A Kysely instance openDatabase did not open has no account handles: itself for every account.
    const elsewhere = new Kysely<DB>({ dialect: new PostgresDialect({ pool: database.pool }) });
    expect(accountDatabasesOf(elsewhere)('acct-a')).toBe(elsewhere);
    const { rows } = await sql<{ one: number }>`SELECT 1 AS one`.execute(a);
    expect(rows).toEqual([{ one: 1 }]);
  });

  it('keeps the most recently used handles, and makes a dropped one again', async () => {
    const database = await open();
    const first = database.forAccount('acct-0');
    const kept = database.forAccount('acct-1');
    for (let n = 2; n <= ACCOUNT_HANDLES_KEPT; n++) {
      database.forAccount(`acct-${n}`);
      if (n % 100 === 0) expect(database.forAccount('acct-1')).toBe(kept); // used again: kept
    }
    // One more account than are kept: the least recently used one, acct-0, was dropped.
    const again = database.forAccount('acct-0');
    expect(again).not.toBe(first);
    expect(database.forAccount('acct-1')).toBe(kept);
    expect((await sql<{ one: number }>`SELECT 1 AS one`.execute(again)).rows).toEqual([{ one: 1 }]);
  });

  it.runIf(inject('testBackend').kind === 'postgres')("holds an account to its share (PostgreSQL: a pool of several connections): its next checkout waits, another account's and no account's do not", async () => {
    const database = await open({ poolMax: 3, poolPerAccount: 1 });
    const a = database.forAccount('acct-a');
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    // A's one connection, held open inside a transaction until released.
    const holding = a.transaction().execute(async (trx) => {
      await sql`SELECT 1`.execute(trx);
      await held;
    });
    await expect.poll(() => database.poolStats.totalCount - database.poolStats.idleCount).toBe(1);

    let aSecondDone = false;
    const aSecond = sql`SELECT 2 AS two`.execute(a).then((result) => ((aSecondDone = true), result));
    // B and work of no account are answered while A's second query waits for A's turn.
    expect((await sql<{ b: number }>`SELECT 3 AS b`.execute(database.forAccount('acct-b'))).rows).toEqual([{ b: 3 }]);
    expect((await sql<{ none: number }>`SELECT 4 AS none`.execute(database.db)).rows).toEqual([{ none: 4 }]);
    expect(aSecondDone).toBe(false);

    release();
    await holding;
    expect((await aSecond).rows).toEqual([{ two: 2 }]);
  });
});
