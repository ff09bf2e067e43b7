-- A batch waits for locked sessions only briefly (issue 19, src/modules/events/append-batcher.ts).
--
-- With 0007, an append of a batch whose session row was locked elsewhere (a long transaction, an
-- operator's UPDATE, another instance's slow append) held the whole batch until the statement
-- timeout, and with it every other session's append in that batch and the instance's batch slot.
-- Now the batch has a budget for lock waits, p_lock_wait_ms in all: before each append, lock_timeout
-- is set to what is left of it (at least 1 ms, since 0 would mean "wait forever"). An append whose
-- session stays locked past that fails with lock_not_available inside its own subtransaction, is not
-- written, and gets no row, like every other append the batch could not write: the service runs it
-- again alone, where it waits for the lock under the statement timeout as an append always did.
--
-- The function keeps 0007's answer; the new parameter has a default, so a call with two arguments
-- (an instance of the previous version during a rolling deploy) still resolves, with the default
-- budget.
DROP FUNCTION append_events_batch(jsonb, integer);

CREATE FUNCTION append_events_batch(
  p_appends jsonb, p_state_limit integer, p_lock_wait_ms integer DEFAULT 200,
  OUT ordinal integer,
  OUT title text, OUT metadata jsonb, OUT state jsonb, OUT memo jsonb, OUT window_start_seq bigint,
  OUT event_count bigint, OUT revision bigint, OUT create_time timestamptz, OUT update_time timestamptz,
  OUT expire_time timestamptz, OUT user_state jsonb, OUT app_state jsonb,
  OUT session_bytes integer, OUT user_bytes integer, OUT app_bytes integer
) RETURNS SETOF record
LANGUAGE plpgsql AS $$
DECLARE
  one jsonb;
  caller_lock_timeout text := current_setting('lock_timeout');
  lock_deadline timestamptz := clock_timestamp() + make_interval(secs => greatest(p_lock_wait_ms, 1) / 1000.0);
BEGIN
  ordinal := 0;
  FOR one IN SELECT value FROM jsonb_array_elements(p_appends) LOOP
    ordinal := ordinal + 1;
    PERFORM set_config('lock_timeout',
      greatest(1, ceil(extract(epoch FROM lock_deadline - clock_timestamp()) * 1000))::bigint || 'ms', true);
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
      NULL; -- not written (a lock wait past the budget among the reasons): the service runs it again alone
    END;
  END LOOP;
  PERFORM set_config('lock_timeout', caller_lock_timeout, true);
END
$$;
