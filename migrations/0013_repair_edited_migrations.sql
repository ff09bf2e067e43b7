-- Repairs the history of the two migrations that were edited after they landed, so that a database
-- that ran either first version ends identical to a fresh one (test/integration/migration-history.test.ts
-- checks both starting points against a fresh database, catalog entry by catalog entry):
--
-- 0006's first version made every INSERT into events NOTIFY `events_appended` from a statement-level
-- trigger; event streams moved to polling (src/db/event-feed.ts) and the later text has no trigger,
-- so a database that ran the first version still pays a notification on every append.
DROP TRIGGER IF EXISTS events_appended ON events;
DROP FUNCTION IF EXISTS notify_events_appended();
--
-- 0007's first version of append_events_batch answered an extra `appended` column. Nothing is left
-- of it to repair: 0008 drops append_events_batch(jsonb, integer) whatever its answer's columns and
-- creates the three-argument version every history now has.
