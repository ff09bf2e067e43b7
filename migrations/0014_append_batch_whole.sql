-- A batch of appends written whole, in one transaction without a subtransaction per append
-- (issue 24, src/modules/events/append.repository.ts).
--
-- append_events_batch() (0007, 0008) gives each append of a batch a subtransaction, a lock_timeout
-- of its own and a call of append_events(), which runs six statements: most batches have nothing
-- to refuse, and pay for that isolation all the same. Per append this function runs two statements,
-- the session's UPDATE (which reads the user's and the space's state as it returns) and the INSERT
-- of its events. A call of 7 appends timed alone (`npm run bench:batch-call`, one client) took
-- 0.93–0.96 of append_events_batch()'s time.
--
-- All or nothing: any append it cannot write raises (AS412 If-Match, AS413 state limit, a stored
-- eventId, a lock wait past p_lock_wait_ms, an append writing user: or app: state, which batches
-- never carry) and nothing of the batch is written. The service then sends the same batch to
-- append_events_batch(), which writes what it can and leaves out the rest, as before. A missing or
-- expired session is not a refusal: like append_events_batch() it has no row, and the service runs
-- that append again alone.
--
-- Same arguments and answer as append_events_batch(). The appends are written in the order given
-- (the service sorts them by session key, so two batches lock sessions in one order), and two
-- appends of one session in a batch are written one after the other, the second seeing the first.
CREATE FUNCTION append_events_batch_whole(
  p_appends jsonb, p_state_limit integer, p_lock_wait_ms integer,
  OUT ordinal integer,
  OUT title text, OUT metadata jsonb, OUT state jsonb, OUT memo jsonb, OUT window_start_seq bigint,
  OUT event_count bigint, OUT revision bigint, OUT create_time timestamptz, OUT update_time timestamptz,
  OUT expire_time timestamptz, OUT user_state jsonb, OUT app_state jsonb,
  OUT session_bytes integer, OUT user_bytes integer, OUT app_bytes integer
) RETURNS SETOF record
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  one jsonb;
  added integer;
  session_deltas jsonb;
  caller_lock_timeout text := current_setting('lock_timeout');
  arrival timestamptz := date_trunc('milliseconds', clock_timestamp());
BEGIN
  IF jsonb_path_exists(p_appends, '$[*].events[*] ? (exists (@.user) || exists (@.app))') THEN
    RAISE EXCEPTION 'append_events_batch_whole() takes no append that writes user: or app: state' USING ERRCODE = 'AS422';
  END IF;
  PERFORM set_config('lock_timeout', greatest(p_lock_wait_ms, 1) || 'ms', true);
  ordinal := 0;
  FOR one IN SELECT value FROM jsonb_array_elements(p_appends) LOOP
    ordinal := ordinal + 1;
    added := jsonb_array_length(one -> 'events');
    session_deltas := jsonb_path_query_array(one -> 'events', '$[*].session');
    UPDATE sessions AS s
    SET state = CASE WHEN session_deltas = '[]' THEN s.state ELSE apply_state_deltas(s.state, session_deltas) END,
        event_count = s.event_count + added,
        revision = CASE
          WHEN NOT one ? 'ifMatch' OR s.revision = ANY (ARRAY(SELECT jsonb_array_elements_text(one -> 'ifMatch')::bigint)) THEN s.revision + 1
          ELSE precondition_failed(s.revision)
        END,
        update_time = greatest(s.update_time, arrival)
    WHERE s.account_id = one ->> 'accountId' AND s.space_id = one ->> 'spaceId' AND s.user_id = one ->> 'userId'
      AND s.session_id = one ->> 'sessionId' AND (s.expire_time IS NULL OR s.expire_time > now())
    RETURNING s.title, s.metadata, s.state, s.memo, s.window_start_seq, s.event_count, s.revision, s.create_time,
              s.update_time, s.expire_time,
              (SELECT u.state FROM space_users AS u
               WHERE u.account_id = s.account_id AND u.space_id = s.space_id AND u.user_id = s.user_id),
              (SELECT sp.state FROM session_spaces AS sp WHERE sp.account_id = s.account_id AND sp.space_id = s.space_id),
              CASE WHEN session_deltas <> '[]' THEN assert_state_size(s.state, 'session', p_state_limit) END
    INTO title, metadata, state, memo, window_start_seq, event_count, revision, create_time, update_time, expire_time,
         user_state, app_state, session_bytes;
    CONTINUE WHEN NOT FOUND;

    INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, invocation_id, author, content, actions,
                        metadata, extensions, error_code, error_message, event_time, create_time, payload_hash)
    SELECT one ->> 'accountId', one ->> 'spaceId', one ->> 'userId', one ->> 'sessionId', event_count - added + e.ordinality,
           e.value ->> 'eventId', e.value ->> 'invocationId', e.value ->> 'author', e.value -> 'content', e.value -> 'actions',
           e.value -> 'metadata', e.value -> 'extensions', e.value ->> 'errorCode', e.value ->> 'errorMessage',
           COALESCE((e.value ->> 'timestamp')::timestamptz, update_time), update_time,
           decode(e.value ->> 'payloadHash', 'hex')
    FROM jsonb_array_elements(one -> 'events') WITH ORDINALITY AS e(value, ordinality);
    RETURN NEXT;
  END LOOP;
  PERFORM set_config('lock_timeout', caller_lock_timeout, true);
END
$$;
