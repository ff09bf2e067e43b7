-- The Citus layout of the schema (docs/scale-out.md), applied on the coordinator after the
-- service's migrations (`npm run migrate`). Idempotent: a table already distributed is skipped, so
-- it can run after every deployment. test/integration/citus-layout.test.ts reads the calls below
-- and checks the live schema against them (constraints, foreign keys, unique indexes).
--
-- Distribution column: account_id, on every tenant table. Reference tables first (they are the
-- targets of the distributed tables' foreign keys), then the distributed tables in foreign-key
-- order, all colocated with session_spaces.

CREATE EXTENSION IF NOT EXISTS citus;

-- Reference tables: small, read on every request (authentication, authorization), copied to every node.
SELECT create_reference_table('accounts') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'accounts'::regclass);
SELECT create_reference_table('principals') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'principals'::regclass);
SELECT create_reference_table('credentials') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'credentials'::regclass);
SELECT create_reference_table('policies') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'policies'::regclass);

-- Distributed tables, hash-distributed by account_id and colocated: one account's spaces, users,
-- sessions and events are on the same shard, so every request's statements go to one node.
SELECT create_distributed_table('session_spaces', 'account_id') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'session_spaces'::regclass);
SELECT create_distributed_table('space_users', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'space_users'::regclass);
SELECT create_distributed_table('sessions', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass);
SELECT create_distributed_table('events', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass);
SELECT create_distributed_table('state_checkpoints', 'account_id', colocate_with => 'session_spaces') WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'state_checkpoints'::regclass);

-- The append runs as one call of append_events (migrations/0004): delegated whole to the worker
-- that holds the account's shard, instead of one coordinator round trip per statement inside it.
SELECT create_distributed_function('append_events(text, text, text, text, jsonb, bigint[], integer)', 'p_account_id', colocate_with => 'sessions');
-- append_events_batch (migrations/0007, the group commit) carries appends of several accounts and
-- stays on the coordinator: run the service with APPEND_BATCH_MAX=1 on Citus (docs/scale-out.md).
