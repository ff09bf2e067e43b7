// Autovacuum's own rules, for the service's work where autovacuum does not run (PGlite, or
// PostgreSQL with autovacuum off): planner-statistics.ts and embedded-vacuum.ts judge by the same
// cluster settings PostgreSQL's autovacuum would, so that a table is due for them exactly when it
// would be due for autovacuum.
import { sql } from 'kysely';

/**
 * Over a pg_stat_user_tables row `t` and its pg_class row `c`: the rows changed since the table's
 * last ANALYZE are past autovacuum_analyze_threshold + autovacuum_analyze_scale_factor × its rows.
 */
export const PAST_ANALYZE_THRESHOLD = sql<boolean>`(t.n_mod_since_analyze > current_setting('autovacuum_analyze_threshold')::float8
  + current_setting('autovacuum_analyze_scale_factor')::float8 * greatest(c.reltuples, 0))`;
