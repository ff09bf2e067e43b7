-- What an append never changes is indexed on a table of its own (issue 24).
--
-- Every append updates its session row (state, eventCount, revision, updateTime). updateTime is in
-- two list indexes, so that update is never HOT: it writes a new entry into every index of
-- sessions, also into those whose keys no append changes: the lists by creation time and the lookup
-- of a session id within a space. bench/batch-call.ts measured a group-commit call of 7
-- single-event appends at 1.30-1.31 of the minimal work as migrated, and at 1.13-1.14 with those
-- three B-trees on a table of their own; 1.44-1.47 and 1.28-1.30 for sessions with a title and
-- metadata (bench/README.md).
--
-- session_catalog holds one row per session: its keys, create time, title and metadata, written
-- when the session is created, when its title, metadata or create time change, and deleted with
-- it, by the trigger below; so no write path (create, update, import, the expiry sweeper, a space's
-- cleanup) can leave it behind. The sessions row keeps its title and metadata, and its two search
-- indexes: every read of a session, and every list ordered by update time, reads sessions as
-- before. A list ordered by creation time walks the catalog and tests its title and metadata
-- filters there, with search indexes of its own; a filter by session ids finds them in the catalog
-- (sessions.repository.ts, listSessionRows). An append's update now writes three index entries
-- instead of six (five instead of eight for a session with a title and metadata).
--
-- On Citus (deploy/citus/distribute.sql, docs/scale-out.md §4) the table is distributed by
-- account_id, colocated with sessions, so a session's catalog row is on the node of its session; a
-- trigger fires on a shard of sessions, and writes the catalog's shard of the same account directly,
-- as delete_session_events() does for events (migrations/0011). A cluster distributed before this
-- migration gets the table distributed here (one DO block, each statement sent on its own, as
-- 0015). Built without CONCURRENTLY (migrations run in a transaction): on a large sessions table
-- this blocks writes to it while the catalog is filled and indexed.
CREATE FUNCTION sync_session_catalog() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  catalog text := 'session_catalog';
  session_account text := CASE TG_OP WHEN 'DELETE' THEN OLD.account_id ELSE NEW.account_id END;
BEGIN
  IF TG_TABLE_NAME <> 'sessions' THEN
    -- A Citus shard of sessions: the catalog's shard of the same account, on the same node.
    catalog := shard_name('session_catalog'::regclass, get_shard_id_for_distribution_column('session_catalog', session_account));
  END IF;
  IF TG_OP = 'DELETE' THEN
    EXECUTE format('DELETE FROM %s WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4', catalog)
      USING OLD.account_id, OLD.space_id, OLD.user_id, OLD.session_id;
  ELSIF TG_OP = 'INSERT' THEN
    -- ON CONFLICT: on Citus, distribute.sql copies the sessions into their shards after the
    -- catalog's rows, and the copy fires this trigger for rows the catalog already holds.
    EXECUTE format('INSERT INTO %s (account_id, space_id, user_id, session_id, create_time, title, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7)'
                   ' ON CONFLICT (account_id, space_id, user_id, session_id) DO UPDATE SET create_time = $5, title = $6, metadata = $7', catalog)
      USING NEW.account_id, NEW.space_id, NEW.user_id, NEW.session_id, NEW.create_time, NEW.title, NEW.metadata;
  ELSIF (NEW.create_time, NEW.title, NEW.metadata) IS DISTINCT FROM (OLD.create_time, OLD.title, OLD.metadata) THEN
    EXECUTE format('UPDATE %s SET create_time = $5, title = $6, metadata = $7 WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4', catalog)
      USING NEW.account_id, NEW.space_id, NEW.user_id, NEW.session_id, NEW.create_time, NEW.title, NEW.metadata;
  END IF;
  RETURN NULL;
END
$$;

DO $migration$
DECLARE
  distributed boolean := false;
BEGIN
  -- Citus's catalog is read only where it exists (PostgreSQL and PGlite have none).
  IF to_regclass('pg_catalog.pg_dist_partition') IS NOT NULL THEN
    EXECUTE $$SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_dist_partition WHERE logicalrelid = 'sessions'::regclass)$$ INTO distributed;
  END IF;
  EXECUTE $$CREATE TABLE session_catalog (
    account_id   text NOT NULL,
    space_id     text NOT NULL,
    user_id      text NOT NULL,
    session_id   text NOT NULL,
    create_time  timestamptz NOT NULL,
    title        text NOT NULL,
    metadata     jsonb NOT NULL,
    PRIMARY KEY (account_id, space_id, user_id, session_id)
  )$$;
  EXECUTE $$INSERT INTO session_catalog SELECT account_id, space_id, user_id, session_id, create_time, title, metadata FROM sessions$$;
  EXECUTE 'CREATE INDEX session_catalog_user_by_create ON session_catalog (account_id, space_id, user_id, create_time, session_id)';
  EXECUTE 'CREATE INDEX session_catalog_space_by_create ON session_catalog (account_id, space_id, create_time, user_id, session_id)';
  EXECUTE 'CREATE INDEX session_catalog_space_by_session_id ON session_catalog (account_id, space_id, session_id)';
  EXECUTE $$CREATE INDEX session_catalog_title_trgm ON session_catalog USING gin (title gin_trgm_ops) WHERE title <> ''$$;
  EXECUTE $$CREATE INDEX session_catalog_metadata_in_space ON session_catalog USING gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops)
            WHERE metadata <> '{}'::jsonb$$;
  IF distributed THEN
    -- As deploy/citus/distribute.sql does for a database distributed after this migration.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    PERFORM create_distributed_table('session_catalog', 'account_id', colocate_with => 'sessions');
    PERFORM create_distributed_function('sync_session_catalog()');
  END IF;
  EXECUTE 'DROP INDEX sessions_user_by_create';
  EXECUTE 'DROP INDEX sessions_space_by_create';
  EXECUTE 'DROP INDEX sessions_space_by_session_id';
  -- Filled here, so the planner has its statistics before autovacuum comes by.
  EXECUTE 'ANALYZE session_catalog';
  EXECUTE 'CREATE TRIGGER sessions_sync_catalog AFTER INSERT OR DELETE OR UPDATE OF create_time, title, metadata ON sessions FOR EACH ROW EXECUTE FUNCTION sync_session_catalog()';
END
$migration$;
