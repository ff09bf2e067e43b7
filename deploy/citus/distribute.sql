-- The Citus layout of the schema (docs/scale-out.md §4), applied on the coordinator after the
-- service's migrations (`npm run migrate`):
--   psql -v ON_ERROR_STOP=1 -d <coordinator database> -f deploy/citus/distribute.sql
-- It sets what it needs for its own session, so plain `psql -f` works too. Idempotent: what is
-- already in place is left alone, so it can run after every deployment (and must, after a migration
-- that adds a table or a function). It works on an empty database and on one holding data (a
-- single-node deployment moving to Citus): create_distributed_table copies the rows into the shards.
-- All of it is one transaction: a failure leaves the database as it was.
--
-- test/integration/citus-layout.test.ts reads the create_reference_table and create_distributed_table
-- calls below and checks the live schema against them; test/citus/ runs the script on a real cluster.
--
-- Distribution column: account_id, on every tenant table. Reference tables for the IAM tables (read
-- on every request, referenced by the tenant tables), then the tenant tables hash-distributed and
-- colocated, then the functions the appends call, delegated to the worker holding the account.

\set ON_ERROR_STOP on
-- The tables keep their triggers (migrations/0004, 0005, 0011): Citus refuses to distribute a table
-- with triggers unless this is on. Only this session's setting: the triggers then run on the shards
-- whatever the servers' setting (the servers need it only for later trigger DDL).
SET citus.enable_unsafe_triggers = on;
-- One connection per node for the shards created here: a distributed table created in the same
-- transaction as the reference tables it references must not open parallel connections.
SET citus.multi_shard_modify_mode = 'sequential';

CREATE EXTENSION IF NOT EXISTS citus;

BEGIN;

-- 1. The foreign keys are held aside while the tables are distributed, and put back at the end.
--    With them in place, create_reference_table('accounts') turns every table that references
--    accounts (directly or through another table) into a Citus "local" table (pg_dist_partition,
--    partmethod 'n', not a reference table), which create_distributed_table then refuses ("foreign
--    keys from reference tables and local tables to distributed tables are not supported",
--    "colocate_with option is not supported with local tables"). Only the keys of tables not yet in
--    their final kind are held, so a second run holds none.
CREATE TEMP TABLE held_foreign_keys ON COMMIT DROP AS
SELECT con.conrelid::regclass AS table_name, con.conname AS constraint_name, pg_get_constraintdef(con.oid) AS definition
FROM pg_constraint con
WHERE con.contype = 'f'
  AND con.conrelid IN (SELECT to_regclass(name) FROM unnest(ARRAY[
        'accounts', 'principals', 'credentials', 'policies',
        'session_spaces', 'space_users', 'sessions', 'session_catalog', 'events', 'state_checkpoints']) AS name)
  AND NOT EXISTS (
    SELECT 1 FROM pg_dist_partition p
    WHERE p.logicalrelid = con.conrelid
      AND (p.partmethod = 'h' OR (p.partmethod = 'n' AND p.repmodel = 't')));

DO $$
DECLARE
  held record;
  leftover regclass;
BEGIN
  FOR held IN SELECT * FROM held_foreign_keys LOOP
    EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', held.table_name, held.constraint_name);
  END LOOP;
  -- A table an earlier attempt left as a Citus local table (the trap described above) goes back
  -- to a plain table first; a reference or hash-distributed table is left as it is.
  FOR leftover IN
    SELECT p.logicalrelid FROM pg_dist_partition p
    WHERE p.logicalrelid IN (SELECT table_name FROM held_foreign_keys UNION SELECT to_regclass(name) FROM unnest(ARRAY[
            'accounts', 'principals', 'credentials', 'policies',
            'session_spaces', 'space_users', 'sessions', 'session_catalog', 'events', 'state_checkpoints']) AS name)
      AND p.partmethod = 'n' AND p.repmodel <> 't'
  LOOP
    PERFORM undistribute_table(leftover);
  END LOOP;
END
$$;

-- 2. Reference tables: small, read on every request (authentication, authorization), a copy on every node.
SELECT create_reference_table('accounts') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'accounts'::regclass);
SELECT create_reference_table('principals') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'principals'::regclass);
SELECT create_reference_table('credentials') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'credentials'::regclass);
SELECT create_reference_table('policies') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'policies'::regclass);

-- 3. Distributed tables, hash-distributed by account_id and colocated: one account's spaces, users,
--    sessions (and their catalog, migrations/0018), events and checkpoints are on the same shard, so
--    every request's statements go to one node.
SELECT create_distributed_table('session_spaces', 'account_id') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'session_spaces'::regclass);
SELECT create_distributed_table('space_users', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'space_users'::regclass);
-- The catalog of sessions (migrations/0018) before sessions: copying the sessions into their shards
-- fires its trigger there, which writes each copied session's catalog row again (the same row) into
-- the catalog's shard of the account, so that shard must exist by then. A database migrated before
-- 0018 has no catalog yet: 0018 distributes it when it comes.
SELECT create_distributed_table(to_regclass('session_catalog'), 'account_id', colocate_with => 'session_spaces')
WHERE to_regclass('session_catalog') IS NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = to_regclass('session_catalog'));
SELECT create_distributed_table('sessions', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass);
SELECT create_distributed_table('events', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass);
SELECT create_distributed_table('state_checkpoints', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'state_checkpoints'::regclass);

-- 4. The foreign keys back: between colocated tables on account_id, or to reference tables.
DO $$
DECLARE
  held record;
BEGIN
  FOR held IN SELECT * FROM held_foreign_keys LOOP
    EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I %s', held.table_name, held.constraint_name, held.definition);
  END LOOP;
END
$$;

-- 5. Functions. The appends run as one call of append_events (migrations/0004) or, grouped per
--    account, of append_events_of_account (migrations/0011): each distributed by its p_account_id,
--    colocated with sessions, so a call is delegated whole to the worker holding the account's shard
--    instead of one coordinator round trip per statement inside it. The functions they call are
--    distributed too (no distribution argument: a copy on every node), so the workers have them.
SELECT create_distributed_function('jsonb_merge_patch(jsonb, jsonb)');
SELECT create_distributed_function('apply_state_deltas(jsonb, jsonb)');
SELECT create_distributed_function('assert_state_size(jsonb, text, integer)');
SELECT create_distributed_function('precondition_failed(bigint)');
SELECT create_distributed_function('append_events_batch(jsonb, integer, integer)');
SELECT create_distributed_function('notify_credentials_changed()');
SELECT create_distributed_function('delete_session_events()');
SELECT create_distributed_function(to_regprocedure('sync_session_catalog()')) WHERE to_regprocedure('sync_session_catalog()') IS NOT NULL;
SELECT create_distributed_function('append_events(text, text, text, text, jsonb, bigint[], integer)', 'p_account_id', colocate_with => 'sessions');
SELECT create_distributed_function('append_events_of_account(text, jsonb, integer, integer)', 'p_account_id', colocate_with => 'sessions');

COMMIT;
