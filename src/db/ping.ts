import { sql } from 'kysely';
import type { Database } from './connect.js';

/** Resolves when the database answers within `timeoutMs`; rejects otherwise. */
export async function pingDatabase(db: Database, timeoutMs: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('database ping timed out')), timeoutMs)));
  try {
    await Promise.race([sql`SELECT 1`.execute(db), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
