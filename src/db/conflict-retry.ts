// A transaction that the database rolled back to break a deadlock (40P01) or a serialization
// conflict (40001) left nothing behind, and a second try usually goes through. The service's lock
// order leaves no deadlock on one PostgreSQL. On Citus, though, a reference table (principals,
// credentials) has a copy on every node, a row lock is taken on each copy, and two transactions can
// reach two copies in opposite orders: the distributed deadlock detector then cancels one of them.
// Answering 503 for what a second try settles would hand the race to the client, so the
// transactions that lock such rows run here again, a bounded number of times, a few random
// milliseconds apart so that the two do not meet the same way again.
import type { Transaction } from 'kysely';
import type { Database } from './connect.js';
import type { DB } from './schema.js';
import { SQLSTATE } from './sqlstate.js';

/** Tries in all, the first included; past them the conflict is answered as any unavailable database is (503). */
const DEFAULT_ATTEMPTS = 3;
const MAX_PAUSE_MS = 20;

function isRolledBackConflict(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return code === SQLSTATE.deadlockDetected || code === SQLSTATE.serializationFailure;
}

/** Runs `work` in a transaction, again (up to `attempts` in all) when the database rolled it back for a deadlock or a serialization conflict. */
export async function transactionRetryingConflicts<T>(db: Database, work: (trx: Transaction<DB>) => Promise<T>, attempts = DEFAULT_ATTEMPTS): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute(work);
    } catch (error) {
      if (attempt >= attempts || !isRolledBackConflict(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1 + Math.random() * MAX_PAUSE_MS));
    }
  }
}
