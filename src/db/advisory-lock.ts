// Transaction-scoped advisory locks on a key of strings, for writes that must take turns without a
// row to lock. The key is a 64-bit hash of its JSON: a collision only makes two unrelated keys wait
// for each other, never merges what they guard. Plain PostgreSQL functions: PGlite and the Citus
// coordinator (where the service's transactions begin) take them as PostgreSQL does.
import { sql, type Transaction } from 'kysely';
import type { DB } from './schema.js';

/** Waits for, then holds until `trx` ends, the advisory lock of `key` (its first part names what it guards). */
export async function lockUntilTransactionEnds(trx: Transaction<DB>, key: readonly string[]): Promise<void> {
  await sql`SELECT pg_advisory_xact_lock(hashtextextended(${JSON.stringify(key)}, 0))`.execute(trx);
}
