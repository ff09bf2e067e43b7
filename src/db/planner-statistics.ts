// Planner statistics for the service's tables where autovacuum has not gathered them (yet).
//
// Every read and write of a session finds its row by the full key (account, space, user, session).
// Without statistics PostgreSQL estimates each of those equalities at 1/200, so the primary key and
// the list indexes that start with (account, space) both look like a one-row scan, and the planner
// may take sessions_space_by_update: each append then walks every index entry of its space. A fresh
// database is in that state until the first ANALYZE. With autovacuum on, that comes within
// autovacuum_naptime (a minute); with autovacuum off it never comes. Measured (`bench:append` on a
// fresh database, autovacuum off): 0.44 ms of PostgreSQL CPU per append where the plan took the list
// index, 0.15 ms with the primary key (bench/README.md).
//
// So every instance applies autovacuum's analyze rule to the tables of its schema itself: a table is
// analyzed once the rows changed since its last ANALYZE pass autovacuum_analyze_threshold +
// autovacuum_analyze_scale_factor × its rows, when autovacuum is off, or when autovacuum is on and
// the table has never been analyzed (the first minute of a database). ANALYZE samples at most
// 300 × default_statistics_target rows however large the table is, and takes no lock that DML
// waits for. PGlite's `autovacuum` reads on and never runs: there this covers the first minute, and
// the embedded vacuum (embedded-vacuum.ts), every minute, the rest.
import { sql } from 'kysely';
import { type PeriodicTask, type TaskLogger, startPeriodicTask } from '../lib/periodic-task.js';
import { PAST_ANALYZE_THRESHOLD } from './autovacuum-rules.js';
import { logTaskFailure } from './errors.js';
import type { Database } from './connect.js';
import { SQLSTATE } from './sqlstate.js';

/** The tables of the current schema whose statistics nothing else will bring up to date soon. */
export async function findTablesToAnalyze(db: Database): Promise<string[]> {
  const { rows } = await sql<{ table: string }>`
    SELECT c.relname AS table
    FROM pg_stat_user_tables AS t
    JOIN pg_class AS c ON c.oid = t.relid
    WHERE t.schemaname = current_schema()
      AND ${PAST_ANALYZE_THRESHOLD}
      AND (NOT (current_setting('autovacuum')::boolean AND current_setting('track_counts')::boolean)
           OR (t.last_analyze IS NULL AND t.last_autoanalyze IS NULL))
    ORDER BY c.relname`.execute(db);
  return rows.map((row) => row.table);
}

// ANALYZE waits for VACUUM, CREATE INDEX and ALTER TABLE on its table; past this it passes the table
// by until the next run rather than hold a pool connection behind an operator's maintenance.
const LOCK_WAIT = '1s';

/**
 * Analyzes each table due, one transaction each. Instances check at once: a transaction-scoped
 * advisory lock per table lets one of them analyze it while the others pass it by. The statement
 * timeout is lifted: an ANALYZE cut short leaves the table due again at every run. Answers the
 * tables it analyzed.
 */
export async function analyzeDueTables(db: Database): Promise<string[]> {
  const analyzed: string[] = [];
  for (const table of await findTablesToAnalyze(db)) {
    if (await analyzeUnlessBusy(db, table)) analyzed.push(table);
  }
  return analyzed;
}

async function analyzeUnlessBusy(db: Database, table: string): Promise<boolean> {
  try {
    return await db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ locked: boolean }>`
        SELECT pg_try_advisory_xact_lock(hashtextextended(${JSON.stringify(['analyze', table])}, 0)) AS locked`.execute(trx);
      if (!rows[0]!.locked) return false; // another instance is at it
      await sql`SET LOCAL statement_timeout = 0`.execute(trx);
      await sql`SELECT set_config('lock_timeout', ${LOCK_WAIT}, true)`.execute(trx);
      await sql`ANALYZE ${sql.id(table)}`.execute(trx);
      return true;
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === SQLSTATE.lockNotAvailable) return false;
    throw error;
  }
}

/** Runs analyzeDueTables every `intervalMs` (counted from the end of a run); a failed run is logged, never thrown. */
export function startStatisticsKeeper(db: Database, { intervalMs, logger }: { intervalMs: number; logger: TaskLogger }): PeriodicTask {
  return startPeriodicTask(async () => {
    const startedAt = performance.now();
    try {
      const analyzed = await analyzeDueTables(db);
      if (analyzed.length > 0) logger.info({ analyzed, durationMs: Math.round(performance.now() - startedAt) }, 'planner statistics gathered');
    } catch (err) {
      // The database out of reach, say: the next run tries again.
      logTaskFailure(logger, err, 'gathering planner statistics');
    }
  }, intervalMs);
}
