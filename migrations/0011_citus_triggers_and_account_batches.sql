-- What the schema needs to run on Citus (docs/scale-out.md §4), and changes nothing on one
-- PostgreSQL (or PGlite): every Citus-only branch below is reached only on a Citus shard.
--
-- On Citus a trigger of a distributed or reference table fires on its shards, on the node holding
-- each shard, with TG_TABLE_NAME the shard's name (`credentials_102008`).
--
-- 1. The credential-change NOTIFY (migrations/0005). A write to a reference table is made on every
--    node's copy and committed with two-phase commit, and PostgreSQL refuses to PREPARE a
--    transaction that has executed NOTIFY: `npm run admin -- create-account` failed with "cannot
--    PREPARE a transaction that has executed LISTEN, UNLISTEN, or NOTIFY". The coordinator is the
--    one node whose part is not prepared (it commits locally, then commits the prepared parts), and
--    it is where the service listens: so the trigger notifies on the coordinator's copy (group 0 in
--    pg_dist_local_group) and does nothing on the workers' copies. The notification stays
--    transactional (sent when the coordinator commits, never for a rolled-back change), as on one
--    PostgreSQL. The payload names the table without the shard suffix.
CREATE OR REPLACE FUNCTION notify_credentials_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  affected jsonb;
  table_name text := TG_TABLE_NAME;
BEGIN
  IF table_name !~ '^(credentials|principals|policies|accounts)$' THEN
    -- A Citus shard: announce from the coordinator's copy only (see above).
    IF (SELECT groupid FROM pg_catalog.pg_dist_local_group) <> 0 THEN
      RETURN NULL;
    END IF;
    table_name := regexp_replace(table_name, '_[0-9]+$', '');
  END IF;
  IF TG_LEVEL = 'STATEMENT' THEN
    PERFORM pg_notify('credentials_changed', '{}');
    RETURN NULL;
  END IF;
  -- An UPDATE announces both the old and the new identity (they differ only if a key changed).
  FOREACH affected IN ARRAY CASE TG_OP
      WHEN 'INSERT' THEN ARRAY[to_jsonb(NEW)]
      WHEN 'DELETE' THEN ARRAY[to_jsonb(OLD)]
      ELSE ARRAY[to_jsonb(OLD), to_jsonb(NEW)]
    END
  LOOP
    PERFORM pg_notify('credentials_changed', (CASE table_name
      WHEN 'credentials' THEN jsonb_build_object('secretId', affected->'secret_id')
      WHEN 'accounts' THEN jsonb_build_object('accountId', affected->'account_id')
      ELSE jsonb_build_object('accountId', affected->'account_id', 'principalId', affected->'principal_id')
    END)::text);
  END LOOP;
  RETURN NULL;
END
$$;

-- 2. A session's events go with it (migrations/0004). On a Citus shard of sessions, `events` would
--    be a distributed query started from inside a shard's statement, which Citus refuses; the
--    session's events are in the colocated shard of events on the same node (same account_id), so
--    the trigger deletes from that shard directly.
CREATE OR REPLACE FUNCTION delete_session_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_TABLE_NAME = 'sessions' THEN
    DELETE FROM events
    WHERE account_id = OLD.account_id AND space_id = OLD.space_id AND user_id = OLD.user_id AND session_id = OLD.session_id;
  ELSE
    EXECUTE format('DELETE FROM %s WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4',
                   shard_name('events'::regclass, get_shard_id_for_distribution_column('events', OLD.account_id)))
      USING OLD.account_id, OLD.space_id, OLD.user_id, OLD.session_id;
  END IF;
  RETURN NULL;
END
$$;

-- 3. Group commit per account (src/modules/events/append-batcher.ts). append_events_batch()
--    (migrations/0007, 0008) carries the appends of any accounts, so on Citus it cannot go to one
--    node. This one carries the appends of one account: deploy/citus/distribute.sql distributes it
--    by p_account_id, colocated with sessions, so that each call is delegated whole to the worker
--    holding the account's shard (one round trip from the coordinator, one commit on the worker),
--    like append_events(). Every element's accountId is replaced by p_account_id, so a call can
--    never write outside the shard it was sent to. Answer and failure rules are append_events_batch's.
--    PL/pgSQL, not SQL: a SQL function could be inlined into the calling query, and Citus delegates
--    only a call of the function itself.
CREATE FUNCTION append_events_of_account(
  p_account_id text, p_appends jsonb, p_state_limit integer, p_lock_wait_ms integer DEFAULT 200,
  OUT ordinal integer,
  OUT title text, OUT metadata jsonb, OUT state jsonb, OUT memo jsonb, OUT window_start_seq bigint,
  OUT event_count bigint, OUT revision bigint, OUT create_time timestamptz, OUT update_time timestamptz,
  OUT expire_time timestamptz, OUT user_state jsonb, OUT app_state jsonb,
  OUT session_bytes integer, OUT user_bytes integer, OUT app_bytes integer
) RETURNS SETOF record
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY
  SELECT * FROM append_events_batch(
    (SELECT COALESCE(jsonb_agg(one.value || jsonb_build_object('accountId', p_account_id) ORDER BY one.ordinality), '[]')
     FROM jsonb_array_elements(p_appends) WITH ORDINALITY AS one),
    p_state_limit, p_lock_wait_ms);
END
$$;
