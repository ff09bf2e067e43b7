-- The append on Citus (docs/scale-out.md §4). append_events() (migrations/0004) runs there on the
-- worker holding the account's shard, where each of its statements is a query on a distributed
-- table, and Citus refuses a VOLATILE function in an UPDATE of one: "functions used in UPDATE
-- queries on distributed tables must not be VOLATILE". The session's UPDATE had two:
--
-- - clock_timestamp(), which read the append's time once the row lock was granted, so that event
--   times follow the order in which a session's appends were serialized. The time is now read when
--   the call starts, and the UPDATE takes the later of it and the session's last update time: a
--   session's event times still never go back, whichever append waited longer for the lock.
-- - precondition_failed(), which raises AS412 and never returns a value: declared IMMUTABLE, which
--   is true of every value it returns (none). It is called with the row's revision, so it is never
--   evaluated ahead of the row.
--
-- Nothing else changes: same parameters, answer and errors, on PostgreSQL and PGlite alike.
ALTER FUNCTION precondition_failed(bigint) IMMUTABLE;

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
    session_bytes := assert_state_size(session.state, 'session', p_state_limit);
  END IF;

  IF user_deltas <> '[]' THEN
    UPDATE space_users AS u SET state = apply_state_deltas(u.state, user_deltas)
    WHERE u.account_id = p_account_id AND u.space_id = p_space_id AND u.user_id = p_user_id
    RETURNING u.state INTO user_state;
    user_bytes := assert_state_size(user_state, 'user', p_state_limit);
  ELSE
    SELECT u.state INTO user_state FROM space_users AS u
    WHERE u.account_id = p_account_id AND u.space_id = p_space_id AND u.user_id = p_user_id;
  END IF;

  IF app_deltas <> '[]' THEN
    UPDATE session_spaces AS sp SET state = apply_state_deltas(sp.state, app_deltas)
    WHERE sp.account_id = p_account_id AND sp.space_id = p_space_id
    RETURNING sp.state INTO app_state;
    app_bytes := assert_state_size(app_state, 'app', p_state_limit);
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
