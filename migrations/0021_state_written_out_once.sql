-- A changed state is written out as JSON text once per append, not twice (issue 24).
--
-- append_events() and append_events_batch_whole() check the state limit with assert_state_size(),
-- which measures octet_length(state::text), and the service's statement selects `state::text` again
-- for the answer (src/modules/events/append-answer.ts): a state of 957 kB was decompressed and
-- written out twice, 7-9 ms each here (bench/heavy-state.ts, bench/README.md 2026-12-07).
--
-- Called with p_state_limit NULL, the two functions no longer measure: they answer -1 in
-- session_bytes (and user_bytes, app_bytes) for a state the append changed, NULL as before for one
-- it did not, and the statement that calls them measures the text it answers with
-- state_text_within_limit() below, raising AS413 as assert_state_size() does. The call and that
-- check are one statement: a raise there writes nothing of the append, or of the batch. Called with
-- a limit, both check it themselves, as before: append_events_batch() (a subtransaction per append)
-- and append_events_of_account() on Citus call them so, and the service does on Citus, where
-- append_events() is delegated to a worker only when called alone (docs/scale-out.md §4).
CREATE FUNCTION state_text_within_limit(state_text text, changed integer, scope text, size_limit integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  bytes integer;
BEGIN
  IF changed IS NULL THEN
    RETURN NULL;
  END IF;
  bytes := octet_length(state_text);
  IF bytes > size_limit THEN
    RAISE EXCEPTION 'the % state would be % bytes', scope, bytes
      USING ERRCODE = 'AS413', DETAIL = json_build_object('scope', scope, 'stateBytes', bytes)::text;
  END IF;
  RETURN bytes;
END
$$;

-- As migrations/0012, but for p_state_limit NULL (above).
CREATE OR REPLACE FUNCTION append_events(
  p_account_id text, p_space_id text, p_user_id text, p_session_id text,
  p_events jsonb, p_if_match bigint[], p_state_limit integer,
  OUT title text, OUT metadata jsonb, OUT state jsonb, OUT memo jsonb, OUT window_start_seq bigint,
  OUT event_count bigint, OUT revision bigint, OUT create_time timestamptz, OUT update_time timestamptz,
  OUT expire_time timestamptz, OUT user_state jsonb, OUT app_state jsonb,
  OUT session_bytes integer, OUT user_bytes integer, OUT app_bytes integer
) RETURNS SETOF record
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
  added integer := jsonb_array_length(p_events);
  session_deltas jsonb := jsonb_path_query_array(p_events, '$[*].session');
  user_deltas jsonb := jsonb_path_query_array(p_events, '$[*].user');
  app_deltas jsonb := jsonb_path_query_array(p_events, '$[*].app');
  session sessions;
  arrival timestamptz := date_trunc('milliseconds', clock_timestamp());
BEGIN
  UPDATE sessions AS s
  SET state = CASE WHEN session_deltas = '[]' THEN s.state ELSE apply_state_deltas(s.state, session_deltas) END,
      event_count = s.event_count + added,
      revision = CASE
        WHEN p_if_match IS NULL OR s.revision = ANY (p_if_match) THEN s.revision + 1
        ELSE precondition_failed(s.revision)
      END,
      update_time = greatest(s.update_time, arrival)
  WHERE s.account_id = p_account_id AND s.space_id = p_space_id AND s.user_id = p_user_id AND s.session_id = p_session_id
    AND (s.expire_time IS NULL OR s.expire_time > now())
  RETURNING s.* INTO session;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  title := session.title; metadata := session.metadata; state := session.state; memo := session.memo;
  window_start_seq := session.window_start_seq; event_count := session.event_count; revision := session.revision;
  create_time := session.create_time; update_time := session.update_time; expire_time := session.expire_time;
  IF session_deltas <> '[]' THEN
    session_bytes := CASE WHEN p_state_limit IS NULL THEN -1 ELSE assert_state_size(session.state, 'session', p_state_limit) END;
  END IF;

  IF user_deltas <> '[]' THEN
    UPDATE space_users AS u SET state = apply_state_deltas(u.state, user_deltas)
    WHERE u.account_id = p_account_id AND u.space_id = p_space_id AND u.user_id = p_user_id
    RETURNING u.state INTO user_state;
    user_bytes := CASE WHEN p_state_limit IS NULL THEN -1 ELSE assert_state_size(user_state, 'user', p_state_limit) END;
  ELSE
    SELECT u.state INTO user_state FROM space_users AS u
    WHERE u.account_id = p_account_id AND u.space_id = p_space_id AND u.user_id = p_user_id;
  END IF;

  IF app_deltas <> '[]' THEN
    UPDATE session_spaces AS sp SET state = apply_state_deltas(sp.state, app_deltas)
    WHERE sp.account_id = p_account_id AND sp.space_id = p_space_id
    RETURNING sp.state INTO app_state;
    app_bytes := CASE WHEN p_state_limit IS NULL THEN -1 ELSE assert_state_size(app_state, 'app', p_state_limit) END;
  ELSE
    SELECT sp.state INTO app_state FROM session_spaces AS sp WHERE sp.account_id = p_account_id AND sp.space_id = p_space_id;
  END IF;

  INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, invocation_id, author, content, actions,
                      metadata, extensions, error_code, error_message, event_time, create_time, payload_hash)
  SELECT p_account_id, p_space_id, p_user_id, p_session_id, session.event_count - added + e.ordinal,
         e.value ->> 'eventId', e.value ->> 'invocationId', e.value ->> 'author', e.value -> 'content', e.value -> 'actions',
         e.value -> 'metadata', e.value -> 'extensions', e.value ->> 'errorCode', e.value ->> 'errorMessage',
         COALESCE((e.value ->> 'timestamp')::timestamptz, session.update_time), session.update_time,
         decode(e.value ->> 'payloadHash', 'hex')
  FROM jsonb_array_elements(p_events) WITH ORDINALITY AS e(value, ordinal);
  RETURN NEXT;
END
$$;

-- As migrations/0014, but for p_state_limit NULL (above).
CREATE OR REPLACE FUNCTION append_events_batch_whole(
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
              CASE
                WHEN session_deltas = '[]' THEN NULL
                WHEN p_state_limit IS NULL THEN -1
                ELSE assert_state_size(s.state, 'session', p_state_limit)
              END
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
