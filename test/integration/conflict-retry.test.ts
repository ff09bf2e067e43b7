// A transaction rolled back to break a deadlock runs again (src/db/conflict-retry.ts), on a real
// deadlock: two transactions lock two rows in opposite orders, PostgreSQL cancels one of them.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { SQLSTATE } from '../../src/db/sqlstate.js';
import { transactionRetryingConflicts } from '../../src/db/conflict-retry.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

describe.runIf(inject('testBackend').kind === 'postgres')('transactions rolled back for a deadlock (PostgreSQL)', () => {
  let database: TestDatabase;
  beforeAll(async () => {
    database = await createTestDatabase({ poolMax: 4 });
    await sql`CREATE TABLE deadlock_pair (name text PRIMARY KEY, writes int NOT NULL DEFAULT 0)`.execute(database.db);
  });
  afterAll(async () => database.dispose());

  /**
   * Two transactions, each locking one row and then, once both hold their first lock, the other's:
   * PostgreSQL lets one through and cancels the other (after deadlock_timeout, here 100 ms).
   * Each run of a transaction's work counts in `runs`.
   */
  async function lockInOppositeOrders(attempts: number) {
    await sql`TRUNCATE deadlock_pair`.execute(database.db);
    await sql`INSERT INTO deadlock_pair (name) VALUES ('a'), ('b')`.execute(database.db);
    const runs = { a: 0, b: 0 };
    let holding = 0;
    const bothHold = new Promise<void>((resolve) => {
      const check = setInterval(() => holding >= 2 && (clearInterval(check), resolve()), 5);
    });
    const lockBoth = (first: 'a' | 'b', second: 'a' | 'b') =>
      transactionRetryingConflicts(
        database.db,
        async (trx) => {
          runs[first]++;
          await sql`SET LOCAL deadlock_timeout = '100ms'`.execute(trx);
          await sql`UPDATE deadlock_pair SET writes = writes + 1 WHERE name = ${first}`.execute(trx);
          if (runs[first] === 1) {
            holding++;
            await bothHold;
          }
          await sql`UPDATE deadlock_pair SET writes = writes + 1 WHERE name = ${second}`.execute(trx);
        },
        attempts,
      );
    const outcomes = await Promise.allSettled([lockBoth('a', 'b'), lockBoth('b', 'a')]);
    const { rows } = await sql<{ name: string; writes: number }>`SELECT name, writes FROM deadlock_pair ORDER BY name`.execute(database.db);
    return { outcomes, runs, writes: rows.map((row) => row.writes) };
  }

  it('runs the cancelled one again: both go through, each row written once by each', { timeout: 20_000 }, async () => {
    const { outcomes, runs, writes } = await lockInOppositeOrders(3);
    expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled']);
    expect(runs.a + runs.b).toBe(3);
    expect(writes).toEqual([2, 2]);
  });

  it('with a single try, the cancelled one fails with 40P01 and leaves nothing behind', { timeout: 20_000 }, async () => {
    const { outcomes, runs, writes } = await lockInOppositeOrders(1);
    const failed = outcomes.filter((outcome) => outcome.status === 'rejected');
    expect(failed).toHaveLength(1);
    expect((failed[0] as PromiseRejectedResult).reason.code).toBe(SQLSTATE.deadlockDetected);
    expect(runs.a + runs.b).toBe(2);
    expect(writes).toEqual([1, 1]);
  });

  it('does not run again what failed for any other reason', async () => {
    let runs = 0;
    await expect(
      transactionRetryingConflicts(database.db, async (trx) => {
        runs++;
        await sql`SELECT 1 / 0`.execute(trx);
      }),
    ).rejects.toMatchObject({ code: '22012' });
    expect(runs).toBe(1);
  });
});
