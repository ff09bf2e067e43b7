-- A changed state is written out as JSON text once per append, not twice (issue 24).
--
-- append_events() and append_events_batch_whole() check the state limit with assert_state_size(),
-- which measures octet_length(state::text), and the service's statement selects `state::text` again
-- for the answer (src/modules/events/append-answer.ts): a state of 957 kB was decompressed and
-- written out twice, 7-9 ms each here (bench/heavy-state.ts, bench/README.md 2026-12-07).
--
-- Given no limit (NULL, which no caller passed before: it measured and never raised),
-- assert_state_size() now answers -1 without writing the state out, so the two functions, called
-- with p_state_limit NULL, answer -1 in session_bytes (and user_bytes, app_bytes) for a state the
-- append changed and NULL as before for one it did not. The statement that calls them measures the
-- text it answers with state_text_within_limit() below, which raises AS413 as assert_state_size()
-- does (assert_state_size() now raises through it). The call and that check are one statement: a
-- raise there writes nothing of the append, or of the batch. Called with a limit, the functions
-- check it themselves, as before: append_events_batch() (a subtransaction per append) and
-- append_events_of_account() on Citus call them so, and the service does on Citus, where
-- append_events() is delegated to a worker only when called alone (docs/scale-out.md §4).

-- The size of `state_text` in bytes, raising AS413 past `size_limit`; NULL when `changed` is NULL
-- (the append left that state alone, so no limit is held against it).
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

-- As migrations/0004, but -1 and no measuring for no limit (above).
CREATE OR REPLACE FUNCTION assert_state_size(state jsonb, scope text, size_limit integer) RETURNS integer
LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF size_limit IS NULL THEN
    RETURN -1;
  END IF;
  RETURN state_text_within_limit(state::text, 0, scope, size_limit);
END
$$;
