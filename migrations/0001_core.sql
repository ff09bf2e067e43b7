-- Core schema: accounts and their credentials, spaces, business users, sessions and events.
-- Every tenant table keeps account_id and space_id in its primary and unique keys so that it can be
-- distributed by space (Citus) without a redesign. Timestamps are kept at millisecond precision
-- because the API exposes milliseconds and page tokens carry them: sub-millisecond values would make
-- keyset cursors skip or repeat rows.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE accounts (
  account_id   text PRIMARY KEY,
  name         text NOT NULL UNIQUE,
  create_time  timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now())
);

-- A principal is who acts: the account's root, or (later) one of its sub-accounts.
CREATE TABLE principals (
  account_id    text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
  principal_id  text NOT NULL,
  kind          text NOT NULL CHECK (kind IN ('root', 'sub')),
  name          text NOT NULL,
  create_time   timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (account_id, principal_id)
);
CREATE UNIQUE INDEX principals_one_root_per_account ON principals (account_id) WHERE kind = 'root';

-- Only a SHA-256 hash of each secret key is stored; secret_id is the public half used to find it.
CREATE TABLE credentials (
  secret_id       text PRIMARY KEY,
  account_id      text NOT NULL,
  principal_id    text NOT NULL,
  secret_hash     bytea NOT NULL,
  status          text NOT NULL DEFAULT 'enabled' CHECK (status IN ('enabled', 'disabled')),
  create_time     timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  last_used_time  timestamptz,
  FOREIGN KEY (account_id, principal_id) REFERENCES principals (account_id, principal_id) ON DELETE CASCADE
);
CREATE INDEX credentials_by_principal ON credentials (account_id, principal_id);

CREATE TABLE session_spaces (
  account_id           text NOT NULL REFERENCES accounts (account_id) ON DELETE CASCADE,
  space_id             text NOT NULL,
  name                 text NOT NULL,
  description          text NOT NULL DEFAULT '',
  is_default           boolean NOT NULL DEFAULT false,
  default_ttl_seconds  integer,
  state                jsonb NOT NULL DEFAULT '{}'::jsonb,
  create_time          timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  update_time          timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (account_id, space_id)
);
CREATE UNIQUE INDEX session_spaces_one_default ON session_spaces (account_id) WHERE is_default;
CREATE INDEX session_spaces_by_create_time ON session_spaces (account_id, create_time, space_id);
CREATE INDEX session_spaces_by_name ON session_spaces (account_id, name);
CREATE INDEX session_spaces_name_trgm ON session_spaces USING gin (name gin_trgm_ops);
CREATE INDEX session_spaces_description_trgm ON session_spaces USING gin (description gin_trgm_ops);

-- A business user of a space: exists once it has a session or user-scoped state.
CREATE TABLE space_users (
  account_id     text NOT NULL,
  space_id       text NOT NULL,
  user_id        text NOT NULL,
  session_count  bigint NOT NULL DEFAULT 0,
  state          jsonb NOT NULL DEFAULT '{}'::jsonb,
  create_time    timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (account_id, space_id, user_id),
  FOREIGN KEY (account_id, space_id) REFERENCES session_spaces (account_id, space_id)
);

CREATE TABLE sessions (
  account_id        text NOT NULL,
  space_id          text NOT NULL,
  user_id           text NOT NULL,
  session_id        text NOT NULL,
  title             text NOT NULL DEFAULT '',
  metadata          jsonb NOT NULL DEFAULT '{}'::jsonb,
  state             jsonb NOT NULL DEFAULT '{}'::jsonb,
  memo              jsonb,
  window_start_seq  bigint NOT NULL DEFAULT 1,
  event_count       bigint NOT NULL DEFAULT 0,
  revision          bigint NOT NULL DEFAULT 1,
  create_time       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  update_time       timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  expire_time       timestamptz,
  PRIMARY KEY (account_id, space_id, user_id, session_id),
  FOREIGN KEY (account_id, space_id, user_id) REFERENCES space_users (account_id, space_id, user_id)
);
-- Keyset paging of one user's sessions and of a whole space, by either timestamp.
CREATE INDEX sessions_user_by_update ON sessions (account_id, space_id, user_id, update_time, session_id);
CREATE INDEX sessions_user_by_create ON sessions (account_id, space_id, user_id, create_time, session_id);
CREATE INDEX sessions_space_by_update ON sessions (account_id, space_id, update_time, user_id, session_id);
CREATE INDEX sessions_space_by_create ON sessions (account_id, space_id, create_time, user_id, session_id);
CREATE INDEX sessions_space_by_session_id ON sessions (account_id, space_id, session_id);
CREATE INDEX sessions_metadata ON sessions USING gin (metadata jsonb_path_ops);
CREATE INDEX sessions_title_trgm ON sessions USING gin (title gin_trgm_ops);
CREATE INDEX sessions_expiring ON sessions (expire_time) WHERE expire_time IS NOT NULL;

CREATE TABLE events (
  account_id      text NOT NULL,
  space_id        text NOT NULL,
  user_id         text NOT NULL,
  session_id      text NOT NULL,
  seq             bigint NOT NULL,
  event_id        text NOT NULL,
  invocation_id   text,
  author          text NOT NULL,
  content         jsonb,
  actions         jsonb,
  metadata        jsonb,
  extensions      jsonb,
  error_code      text,
  error_message   text,
  event_time      timestamptz NOT NULL,
  create_time     timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  -- SHA-256 of the canonical JSON of the event as the client sent it: a retry with the same
  -- eventId is a replay only when this matches.
  payload_hash    bytea NOT NULL,
  PRIMARY KEY (account_id, space_id, user_id, session_id, seq),
  UNIQUE (account_id, space_id, user_id, session_id, event_id),
  FOREIGN KEY (account_id, space_id, user_id, session_id)
    REFERENCES sessions (account_id, space_id, user_id, session_id) ON DELETE CASCADE
);
CREATE INDEX events_by_author ON events (account_id, space_id, user_id, session_id, author, seq);
CREATE INDEX events_by_time ON events (account_id, space_id, user_id, session_id, event_time, seq);
