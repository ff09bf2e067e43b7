// Autovacuum's work for the embedded database. PGlite runs PostgreSQL as one process, without
// PostgreSQL's background workers: its `autovacuum` setting reads `on`, and no table is ever
// vacuumed or analyzed (checked: `last_autovacuum` stays null however many rows die and however
// long it idles). Left so, every append's dead session row and its index entries stay, the
// planner never learns the tables' sizes, and the transaction ids are never frozen: after about two
// billion writing transactions PostgreSQL stops accepting writes to protect against wraparound.
//
// So the embedded server does autovacuum's job itself, by autovacuum's own rules: every interval it
// reads the statistics PostgreSQL keeps anyway (pg_stat_user_tables), and vacuums or analyzes each
// table past the thresholds of the autovacuum settings, one table at a time. There is one
// connection, so a table's VACUUM holds the requests that arrive meanwhile; a table is vacuumed only
// when enough of it changed, which keeps each run in proportion to the writes since the last.
import { sql } from 'kysely';
import { type PeriodicTask, type TaskLogger, startPeriodicTask } from '../lib/periodic-task.js';
import { PAST_ANALYZE_THRESHOLD } from './autovacuum-rules.js';
import { logTaskFailure } from './errors.js';
import type { Database } from './connect.js';

/** A table of the current schema that autovacuum's rules say is due. */
export interface DueTable {
  table: string;
  /** VACUUM (ANALYZE) when true, ANALYZE alone otherwise. */
  vacuum: boolean;
}

/**
 * The tables autovacuum would take now: dead rows past autovacuum_vacuum_threshold +
 * autovacuum_vacuum_scale_factor × rows, inserted rows past the insert threshold (so that an
 * append-only table such as events gets its pages frozen and marked all-visible), or the oldest
 * unfrozen transaction id past autovacuum_freeze_max_age (the VACUUM is then aggressive); and rows
 * changed since the last ANALYZE past the analyze threshold.
 */
export async function findDueTables(db: Database): Promise<DueTable[]> {
  const { rows } = await sql<{ table: string; vacuum: boolean; analyze: boolean }>`
    WITH setting AS (
      SELECT current_setting('autovacuum_vacuum_threshold')::float8 AS vacuum_base,
             current_setting('autovacuum_vacuum_scale_factor')::float8 AS vacuum_scale,
             current_setting('autovacuum_vacuum_insert_threshold')::float8 AS insert_base,
             current_setting('autovacuum_vacuum_insert_scale_factor')::float8 AS insert_scale,
             current_setting('autovacuum_freeze_max_age')::float8 AS freeze_max_age
    )
    SELECT c.relname AS table,
           (t.n_dead_tup > s.vacuum_base + s.vacuum_scale * greatest(c.reltuples, 0)
            OR t.n_ins_since_vacuum > s.insert_base + s.insert_scale * greatest(c.reltuples, 0)
            OR age(c.relfrozenxid) > s.freeze_max_age) AS vacuum,
           ${PAST_ANALYZE_THRESHOLD} AS analyze
    FROM pg_stat_user_tables AS t
    JOIN pg_class AS c ON c.oid = t.relid
    CROSS JOIN setting AS s
    WHERE t.schemaname = current_schema()
    ORDER BY c.relname`.execute(db);
  return rows.filter((row) => row.vacuum || row.analyze).map(({ table, vacuum }) => ({ table, vacuum }));
}

/**
 * Vacuums (with ANALYZE) or analyzes each due table, one statement each, outside any transaction
 * (VACUUM cannot run in one), on one connection held for the run: the statement timeout is lifted
 * for it, because a VACUUM cut short by it would leave the table as it was and be due again at
 * every run. Answers what it did.
 */
export async function vacuumDueTables(db: Database): Promise<DueTable[]> {
  const due = await findDueTables(db);
  if (due.length === 0) return due;
  await db.connection().execute(async (connection) => {
    const { rows } = await sql<{ timeout: string }>`SELECT current_setting('statement_timeout') AS timeout`.execute(connection);
    await sql`SET statement_timeout = 0`.execute(connection);
    try {
      for (const { table, vacuum } of due) {
        await (vacuum ? sql`VACUUM (ANALYZE) ${sql.id(table)}` : sql`ANALYZE ${sql.id(table)}`).execute(connection);
      }
    } finally {
      await sql`SELECT set_config('statement_timeout', ${rows[0]!.timeout}, false)`.execute(connection);
    }
  });
  return due;
}

/** Cancels the next run and waits for one in flight. */
export type EmbeddedVacuum = PeriodicTask;

/** Runs vacuumDueTables every `intervalMs` (counted from the end of a run); a failed run is logged, never thrown. */
export function startEmbeddedVacuum(db: Database, { intervalMs, logger }: { intervalMs: number; logger: TaskLogger }): EmbeddedVacuum {
  return startPeriodicTask(async () => {
    const startedAt = performance.now();
    try {
      const done = await vacuumDueTables(db);
      if (done.length > 0) {
        const durationMs = Math.round(performance.now() - startedAt);
        logger.info({ vacuumed: done.filter((t) => t.vacuum).map((t) => t.table), analyzed: done.filter((t) => !t.vacuum).map((t) => t.table), durationMs }, 'embedded database maintained');
      }
    } catch (err) {
      // The next run tries again; a failing maintenance must not take the process down.
      logTaskFailure(logger, err, 'embedded database maintenance');
    }
  }, intervalMs);
}
