-- Issue 13: the console's live timeline and "state at event N".
--
-- 1. Every INSERT into events announces, once per statement and session, the newest seq it wrote on
--    the channel `events_appended` (payload {"accountId", "spaceId", "userId", "sessionId", "seq"}).
--    An instance LISTENs on one connection and fans the announcement out to its open event streams
--    (src/modules/events/event-feed.ts); a stream then reads the new events with one short query.
--    The notification is sent at commit, and only then. The statement-level trigger with a transition
--    table costs one aggregate per append statement, not one notification per event of a batch.
CREATE FUNCTION notify_events_appended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('events_appended', json_build_object(
            'accountId', account_id, 'spaceId', space_id, 'userId', user_id, 'sessionId', session_id, 'seq', max(seq))::text)
  FROM appended
  GROUP BY account_id, space_id, user_id, session_id;
  RETURN NULL;
END
$$;

CREATE TRIGGER events_appended AFTER INSERT ON events REFERENCING NEW TABLE AS appended
  FOR EACH STATEMENT EXECUTE FUNCTION notify_events_appended();

-- 2. The session-scoped state a session was created with, so that its state after any event can be
--    replayed from the start: initial_state, then each event's stateDelta in seq order. NULL where
--    it is not known: sessions created before this migration and imported sessions (an export
--    carries the final state and the deltas, and merge patches cannot be undone).
ALTER TABLE sessions ADD COLUMN initial_state jsonb;
