import { CompiledQuery } from 'kysely';
import type { Database } from './connect.js';
import { preparedStatement } from './prepared-statements.js';

// Named like the per-turn statements, so that it fails when they would (a session that kept names
// the connection does not know of, a pooler that cannot keep them): readiness means "a turn works".
const READINESS_PROBE = preparedStatement('readiness_probe', 'SELECT 1 AS ready');

/** Resolves when the database answers within `timeoutMs`; rejects otherwise. */
export async function pingDatabase(db: Database, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('database ping timed out')), timeoutMs)));
  try {
    await Promise.race([db.executeQuery(CompiledQuery.raw(READINESS_PROBE)), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
