-- The search indexes of sessions hold only the sessions a search can find (issue 24).
--
-- Every append updates its session row (state, eventCount, revision, updateTime), and since
-- updateTime is in two of the list indexes the update is never HOT: each one adds an entry to every
-- index of sessions, the two GIN indexes included, even though the title and the metadata did not
-- change. Most sessions of agents have no title and no metadata, and no search can find those:
-- a title search (`title = x` or `LIKE '%x%'` with x not empty) matches only a title that is not
-- empty, and a metadata filter (containment of a key and value) only metadata that is not empty.
-- Partial indexes leave such sessions out, so their appends write nothing to the GIN indexes, and a
-- GIN pending list that no longer grows by one entry per append is not flushed by one of them.
-- bench/batch-call.ts with BENCH_SETUP_SQL measured the whole group-commit call at 1.53 of the
-- minimal work with these predicates, against 1.57-1.60 without (bench/README.md).
--
-- The list query states the predicates as written here, as literals (sessions.repository.ts,
-- filterExpression): the planner uses a partial index only for a query it can prove implies the
-- predicate, and a bound parameter proves nothing.
--
-- One top-level statement, a DO block: on a Citus cluster already distributed (deploy/citus/
-- distribute.sql, run after every deployment's migrations) the index DDL must reach every shard,
-- and Citus refuses to propagate DDL that arrives as several statements in one query string ("cannot
-- insert multiple commands into a prepared statement", sent to the workers); each EXECUTE below is
-- one statement to it (test/citus/distribute.test.ts applies this migration to a distributed
-- database).
--
-- Built without CONCURRENTLY (migrations run in a transaction), like 0003: on a large sessions
-- table this blocks writes to it for as long as the builds take.
DO $migration$
BEGIN
  EXECUTE 'DROP INDEX sessions_title_trgm';
  EXECUTE $$CREATE INDEX sessions_title_trgm ON sessions USING gin (title gin_trgm_ops) WHERE title <> ''$$;
  EXECUTE 'DROP INDEX sessions_metadata_in_space';
  EXECUTE $$CREATE INDEX sessions_metadata_in_space ON sessions USING gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops)
            WHERE metadata <> '{}'::jsonb$$;
END
$migration$;
