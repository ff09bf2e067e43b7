-- Issue 13: the console's live timeline and "state at event N".
--
-- Event streams need nothing here: an instance polls the event counts of the sessions it streams
-- (src/db/event-feed.ts), so the append path gains no trigger and no notification.
--
-- The session-scoped state a session was created with, so that its state after any event can be
-- replayed from the start: initial_state, then each event's stateDelta in seq order. NULL where it
-- is not known: sessions created before this migration and imported sessions (an export carries
-- the final state and the deltas, and merge patches cannot be undone).
ALTER TABLE sessions ADD COLUMN initial_state jsonb;
