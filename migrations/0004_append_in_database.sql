-- The append as one statement (issue 9): the state deltas are merged inside PostgreSQL, so an
-- append is a single call of append_events() instead of a transaction of four round trips, and
-- the session state no longer travels to the service and back to be merged.
--
-- Custom SQLSTATEs raised here, turned into API errors at the database boundary
-- (src/modules/events/append.repository.ts):
--   AS412  If-Match names another revision (DETAIL: the current revision)
--   AS413  a scope's state would exceed the size limit (DETAIL: {"scope", "stateBytes"})

-- RFC 7396 JSON Merge Patch. An object patch merges key by key (null removes the key, an object
-- merges recursively into what is there, anything else replaces it); any other patch replaces
-- the target whole. test/integration/merge-patch-sql.test.ts holds it to the 15 examples of the
-- RFC's Appendix A and to the TypeScript applyMergePatch on random values.
CREATE FUNCTION jsonb_merge_patch(target jsonb, patch jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  merged jsonb;
  name text;
  value jsonb;
BEGIN
  IF patch IS NULL OR jsonb_typeof(patch) <> 'object' THEN
    RETURN patch;
  END IF;
  merged := CASE WHEN jsonb_typeof(target) = 'object' THEN target ELSE '{}'::jsonb END;
  FOR name, value IN SELECT key, j.value FROM jsonb_each(patch) AS j LOOP
    IF jsonb_typeof(value) = 'null' THEN
      merged := merged - name;
    ELSIF jsonb_typeof(value) = 'object' THEN
      merged := merged || jsonb_build_object(name, jsonb_merge_patch(merged -> name, value));
    ELSE
      merged := merged || jsonb_build_object(name, value);
    END IF;
  END LOOP;
  RETURN merged;
END
$$;

-- Folds the deltas of one scope over a state, in order. Each element of `deltas` is
-- {"delta": {...}, "mode": "merge-patch" | "replace"} or null (that event does not touch the scope).
-- replace is ADK's rule: top-level keys replace the stored value whole and null is stored.
CREATE FUNCTION apply_state_deltas(state jsonb, deltas jsonb) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
  step jsonb;
BEGIN
  FOR step IN SELECT value FROM jsonb_array_elements(deltas) LOOP
    CONTINUE WHEN jsonb_typeof(step) <> 'object';
    IF step ->> 'mode' = 'replace' THEN
      state := state || (step -> 'delta');
    ELSE
      state := jsonb_merge_patch(state, step -> 'delta');
    END IF;
  END LOOP;
  RETURN state;
END
$$;

-- 413 at the database boundary when a state's JSON text is longer than the limit. The size is the
-- state as PostgreSQL writes it (jsonb text: a space after each ':' and ','); the service measures
-- states the same way wherever it checks this limit (src/lib/json-measure.ts, stateBytes).
CREATE FUNCTION assert_state_size(state jsonb, scope text, size_limit integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  bytes integer := octet_length(state::text);
BEGIN
  IF bytes > size_limit THEN
    RAISE EXCEPTION 'the % state would be % bytes', scope, bytes
      USING ERRCODE = 'AS413', DETAIL = json_build_object('scope', scope, 'stateBytes', bytes)::text;
  END IF;
  RETURN bytes;
END
$$;

-- 412 at the database boundary: If-Match named another revision.
CREATE FUNCTION precondition_failed(current_revision bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'If-Match does not match the current revision %', current_revision
    USING ERRCODE = 'AS412', DETAIL = current_revision::text;
END
$$;

-- Appends `p_events` (a JSON array, in order) to a live session and applies their deltas, all or
-- nothing. Each element: eventId, author, and optionally invocationId, content, actions (as
-- stored), metadata, extensions, errorCode, errorMessage, timestamp (ISO 8601; default: the append's
-- time), payloadHash (hex), and the scoped parts of its delta: session, user, app (each
-- {"delta", "mode"} or absent). `p_if_match`: the revisions If-Match accepts, or null for any.
--
-- The UPDATE of the session row takes the row lock; appends of one session queue there, and the
-- statements after it see every earlier append committed. The seq numbers follow from the counter
-- it returns, and the append's time is read when the lock is granted, so event times follow the
-- order in which appends were serialized. Shared states are locked after the session, user before
-- space (the order every writer keeps), and only when a delta writes them.
--
-- An eventId already stored raises unique_violation (23505) from the INSERT and nothing is
-- written: the service then answers the replay under the session lock. A missing or expired
-- session returns no row.
CREATE FUNCTION append_events(
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
BEGIN
  UPDATE sessions AS s
  SET state = CASE WHEN session_deltas = '[]' THEN s.state ELSE apply_state_deltas(s.state, session_deltas) END,
      event_count = s.event_count + added,
      revision = CASE
        WHEN p_if_match IS NULL OR s.revision = ANY (p_if_match) THEN s.revision + 1
        ELSE precondition_failed(s.revision)
      END,
      update_time = date_trunc('milliseconds', clock_timestamp())
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


-- The foreign key from events to sessions checked every inserted event against the session row (an
-- RI trigger per event: with it, a one-statement append ran at 0.6 of its speed without it). The
-- append inserts events only while it holds the session row, so it cannot orphan one; what the key
-- still did was the cascade, which this trigger keeps: whichever path deletes a session (delete,
-- the expiry sweeper, an import that replaces it, a space cleanup), its events go in the same
-- transaction.
ALTER TABLE events DROP CONSTRAINT events_account_id_space_id_user_id_session_id_fkey;

CREATE FUNCTION delete_session_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM events
  WHERE account_id = OLD.account_id AND space_id = OLD.space_id AND user_id = OLD.user_id AND session_id = OLD.session_id;
  RETURN NULL;
END
$$;

CREATE TRIGGER sessions_delete_events AFTER DELETE ON sessions FOR EACH ROW EXECUTE FUNCTION delete_session_events();
