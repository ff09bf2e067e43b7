// The readiness probe's query: the database answers a named statement (src/db/ping.ts).
import type { Database } from '../../db/connect.js';
import { pingDatabase } from '../../db/ping.js';

/** Resolves when the database answers within `timeoutMs`; rejects otherwise. */
export function databaseAnswers(db: Database, timeoutMs: number): Promise<void> {
  return pingDatabase(db, timeoutMs);
}
