-- Planner statistics for the columns statements look rows up by, and for no others.
--
-- ANALYZE (autovacuum's, or the service's own where autovacuum is off: src/db/planner-statistics.ts)
-- samples up to 30,000 rows of a table and sorts and counts every column of them. For events most of
-- that time went to the JSON payload: on a table of 168,000 events of the append bench, ANALYZE
-- took 580-700 ms, of which content and actions alone 410 ms and the key, order and filter columns
-- 250 ms; at a million events the whole took 2.3-7 s of a core, once for every tenth of the table
-- appended again (bench/README.md, 2026-12-07). No statement filters, joins or sorts on the columns
-- below (each is read only as part of the rows found by the keys, seq, eventId, author or time), so
-- their statistics would never be used: a target of 0 makes ANALYZE pass them by. The states and
-- memos of sessions, users and checkpoints are the same case.
--
-- Citus (docs/scale-out.md §4): a database distributed after this migration gets the targets in its
-- shards, which Citus creates from the table's definition, targets included. On one distributed
-- before it, Citus refuses ALTER COLUMN ... SET STATISTICS on a distributed table; the coordinator's
-- table is altered with DDL propagation off, and each shard through run_command_on_shards.
DO $migration$
DECLARE
  planned_by_keys_only CONSTANT jsonb := '{
    "events": ["invocation_id", "content", "actions", "metadata", "extensions", "error_code", "error_message", "create_time", "payload_hash"],
    "sessions": ["state", "memo", "initial_state"],
    "state_checkpoints": ["state"],
    "space_users": ["state"],
    "session_spaces": ["state"]
  }';
  target record;
  alteration text;
  distributed boolean;
BEGIN
  FOR target IN SELECT key AS table_name, value AS columns FROM jsonb_each(planned_by_keys_only) LOOP
    SELECT string_agg(format('ALTER COLUMN %I SET STATISTICS 0', column_name), ', ')
      INTO alteration
      FROM jsonb_array_elements_text(target.columns) AS column_name;
    distributed := false;
    -- Citus's catalog is read only where it exists (PostgreSQL and PGlite have none).
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
      EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)' INTO distributed USING target.table_name;
    END IF;
    IF distributed THEN
      PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
      EXECUTE format('ALTER TABLE %I %s', target.table_name, alteration);
      PERFORM set_config('citus.enable_ddl_propagation', 'on', true);
      PERFORM run_command_on_shards(target.table_name, 'ALTER TABLE %s ' || alteration);
    ELSE
      EXECUTE format('ALTER TABLE %I %s', target.table_name, alteration);
    END IF;
  END LOOP;
END
$migration$;
