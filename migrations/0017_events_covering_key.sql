-- The events' filter columns ride in the primary key instead of two indexes of their own (issue 24).
--
-- Every event an append stores wrote four index entries, each led by the four text keys of its
-- session: the primary key (… seq), the eventId key (… event_id), events_by_author (… author, seq)
-- and events_by_time (… event_time, seq). The last two serve only the author and time filters of
-- an event listing (DescribeSessionEvents' Author and AfterTimestamp, REST's `author`, `after`,
-- `before`) and its count. bench/batch-call.ts, with them dropped by BENCH_SETUP_SQL and the
-- primary key built as below, measured a group-commit call of 15 appends of 10 events at 1.43-1.47
-- of the minimal work instead of 1.76-1.81, and of 7 single-event appends at 1.25-1.29 instead of
-- 1.33-1.36 (bench/README.md).
--
-- What the listings give up, and why it is bounded: a page is ordered by seq, so a filtered page is
-- found by walking the session's primary key in seq order and testing author and event_time on the
-- index entry itself (INCLUDE), without reading an event's row; only the page's rows are read
-- (events.repository.ts, listEvents; test/integration/offset-paging.test.ts checks the plan). A
-- filtered count walks the session's entries as an unfiltered count always did. Measured on one
-- session of 100,000 events (1% by author 'user', 500-byte contents), warm, EXPLAIN ANALYZE:
--   - a page of author 'user': 0.9 ms (before: 3.1 ms, through events_by_author and each row);
--   - a page of `after` the last 3%, ascending: 14 ms (before: 39 ms warm, 357 ms cold; the planner
--     never took events_by_time for a page ordered by seq, it walked the rows in seq order);
--   - the count of author 'user': 16 ms, as the session's unfiltered count (before: 0.9 ms).
-- So only a count or a page of a rare author on a long session pays more, and never more than the
-- unfiltered count of the same session; each append paid for the two indexes whether anyone ever
-- filtered or not.
--
-- One top-level statement, a DO block, as 0015: on a Citus cluster already distributed
-- (deploy/citus/distribute.sql) each EXECUTE reaches every shard. Built without CONCURRENTLY
-- (migrations run in a transaction): on a large events table this blocks writes to it for as long
-- as the new key takes to build.
DO $migration$
BEGIN
  EXECUTE 'DROP INDEX events_by_author';
  EXECUTE 'DROP INDEX events_by_time';
  EXECUTE 'ALTER TABLE events DROP CONSTRAINT events_pkey';
  EXECUTE 'ALTER TABLE events ADD CONSTRAINT events_pkey PRIMARY KEY (account_id, space_id, user_id, session_id, seq) INCLUDE (author, event_time)';
END
$migration$;
