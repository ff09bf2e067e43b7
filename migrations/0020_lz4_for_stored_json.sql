-- The stored JSON of tenants is compressed with lz4 where the server has it.
--
-- A value over about 2 kB is compressed when it is written (TOAST). PostgreSQL's default method,
-- pglz, is the slow part of writing a large state: every append that changes a session's state
-- writes the whole state again, and for a state of 930 kB (5,500 keys) the UPDATE took 23 ms with
-- pglz and 8 ms with lz4, for a stored size within 2 % of each other (226 and 229 kB), and reading
-- it back is no slower (bench/heavy-state.ts, bench/README.md 2026-12-07). The same holds for a large
-- event's content or actions.
--
-- Only new values are compressed so: SET COMPRESSION changes no stored row, and an append writes
-- its session's state anew, so a state moves to lz4 on its next change. A server built without lz4
-- (PGlite, some builds of PostgreSQL) lists only pglz in default_toast_compression's values: there
-- the migration changes nothing and every column keeps pglz. A jsonb column added to these tables
-- later says `COMPRESSION lz4` in the same way, or it is written with the server's default.
--
-- Citus (docs/scale-out.md §4): as 0019, a table already distributed is altered on the coordinator
-- with DDL propagation off and on each shard through run_command_on_shards; a database distributed
-- after this migration gets shards made from the altered tables.
DO $migration$
DECLARE
  stored_json CONSTANT jsonb := '{
    "events": ["content", "actions", "metadata", "extensions"],
    "sessions": ["state", "memo", "initial_state", "metadata"],
    "session_catalog": ["metadata"],
    "state_checkpoints": ["state"],
    "space_users": ["state"],
    "session_spaces": ["state"]
  }';
  target record;
  alteration text;
  distributed boolean;
  ddl_propagation text;
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_settings WHERE name = 'default_toast_compression' AND 'lz4' = ANY (enumvals)) THEN
    RETURN;
  END IF;
  FOR target IN SELECT key AS table_name, value AS columns FROM jsonb_each(stored_json) LOOP
    SELECT string_agg(format('ALTER COLUMN %I SET COMPRESSION lz4', column_name), ', ')
      INTO alteration
      FROM jsonb_array_elements_text(target.columns) AS column_name;
    distributed := false;
    -- Citus's catalog is read only where it exists (PostgreSQL has none).
    IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
      EXECUTE 'SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = $1::regclass)' INTO distributed USING target.table_name;
    END IF;
    IF distributed THEN
      ddl_propagation := current_setting('citus.enable_ddl_propagation');
      PERFORM set_config('citus.enable_ddl_propagation', 'off', true);
      EXECUTE format('ALTER TABLE %I %s', target.table_name, alteration);
      PERFORM set_config('citus.enable_ddl_propagation', ddl_propagation, true);
      -- run_command_on_shards reports a shard it could not alter in its rows; it raises nothing.
      IF EXISTS (SELECT 1 FROM run_command_on_shards(target.table_name, 'ALTER TABLE %s ' || alteration) AS shard WHERE NOT shard.success) THEN
        RAISE EXCEPTION 'a shard of % could not be altered: %', target.table_name, alteration;
      END IF;
    ELSE
      EXECUTE format('ALTER TABLE %I %s', target.table_name, alteration);
    END IF;
  END LOOP;
END
$migration$;
