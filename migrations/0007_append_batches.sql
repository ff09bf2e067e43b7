-- Group commit of appends (issue 9, src/modules/events/append-batcher.ts): appends that arrive at
-- one instance while its earlier ones are still in the database go to it together, as one call of
-- append_events_batch(), one round trip and one commit for all of them.
--
-- Each append runs in a subtransaction of its own (the BEGIN … EXCEPTION block), so it is still all
-- or nothing by itself. The answer has a row for each append that was written, under its ordinal
-- (1-based, in `p_appends` order); an append without a row was not written: it failed (If-Match, a
-- state over the limit, an eventId already stored, a deadlock) and was rolled back alone, or its
-- session is missing or expired. The service runs each of those again by itself through
-- append_events(), which gives it exactly the answer it would have had alone (the replay, 404, 409,
-- 412 or 413).
-- A statement timeout or a cancel is not caught here: it ends the whole call, and the service runs
-- every append of it alone.
--
-- Lock order: the service sends the appends sorted by session key, and batches hold only session
-- rows (an append that writes user: or app: state never joins a batch), so two batches lock their
-- sessions in the same order and cannot deadlock with each other.
--
-- Each element of `p_appends`: accountId, spaceId, userId, sessionId, events (append_events()'s
-- p_events), ifMatch (an array of revisions, or absent for any). A transaction keeps the ids of at
-- most 64 subtransactions in shared memory before every snapshot gets slower; the service sends at
-- most 32 appends per call (APPEND_BATCH_MAX).
CREATE FUNCTION append_events_batch(
  p_appends jsonb, p_state_limit integer,
  OUT ordinal integer,
  OUT title text, OUT metadata jsonb, OUT state jsonb, OUT memo jsonb, OUT window_start_seq bigint,
  OUT event_count bigint, OUT revision bigint, OUT create_time timestamptz, OUT update_time timestamptz,
  OUT expire_time timestamptz, OUT user_state jsonb, OUT app_state jsonb,
  OUT session_bytes integer, OUT user_bytes integer, OUT app_bytes integer
) RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
  one jsonb;
BEGIN
  ordinal := 0;
  FOR one IN SELECT value FROM jsonb_array_elements(p_appends) LOOP
    ordinal := ordinal + 1;
    BEGIN
      SELECT * INTO title, metadata, state, memo, window_start_seq, event_count, revision, create_time, update_time,
                    expire_time, user_state, app_state, session_bytes, user_bytes, app_bytes
      FROM append_events(one ->> 'accountId', one ->> 'spaceId', one ->> 'userId', one ->> 'sessionId', one -> 'events',
                         CASE WHEN one ? 'ifMatch' THEN ARRAY(SELECT jsonb_array_elements_text(one -> 'ifMatch')::bigint) END,
                         p_state_limit);
      IF FOUND THEN
        RETURN NEXT;
      END IF;
    EXCEPTION WHEN OTHERS THEN
      NULL; -- not written: the service runs it again alone
    END;
  END LOOP;
END
$$;
