// Whether the database is a Citus coordinator (docs/scale-out.md §4). What changes there: the group
// commit forms its batches per account, so that each batch is one call delegated to the worker
// holding that account's shard (src/modules/events/append-batcher.ts, migrations/0011).
import { sql } from 'kysely';
import type { Executor } from './connect.js';

/** True when the citus extension is installed in the database the service uses. */
export async function detectCitus(db: Executor): Promise<boolean> {
  const { rows } = await sql<{ citus: boolean }>`SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'citus') AS citus`.execute(db);
  return rows[0]?.citus === true;
}
