import { CompiledQuery } from 'kysely';
import type { Database } from './connect.js';
import { preparedStatement } from './prepared-statements.js';

// Named like the per-turn statements, so that it fails when they would (a session that kept names
// the connection does not know of, a pooler that cannot keep them): readiness means "a turn works",
// and a turn writes: a read-only database (a hot standby, a demoted primary) is not ready either.
const READINESS_PROBE = preparedStatement('readiness_probe', "SELECT current_setting('transaction_read_only') = 'off' AS writable");

/** Resolves when the database answers within `timeoutMs`; rejects otherwise. */
export async function pingDatabase(db: Database, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('database ping timed out')), timeoutMs)));
  try {
    const { rows } = await Promise.race([db.executeQuery<{ writable: boolean }>(CompiledQuery.raw(READINESS_PROBE)), timeout]);
    if (rows[0]?.writable !== true) throw new Error('the database takes no writes (transaction_read_only is on)');
  } finally {
    clearTimeout(timer);
  }
}
