-- Checkpoints of the replayed session state (GET …/state-at/{seq}, src/modules/state/): the
-- session-scoped state right after event `seq`, folded from the session's initial state (or {}) and
-- the events' stateDelta exactly as the replay folds them. Written lazily by the replay, at every
-- multiple of the interval it passes (STATE_CHECKPOINT_INTERVAL), never by the append: a replay to N
-- then starts from the greatest checkpoint below N and folds at most one interval of events.
--
-- Keyed like events (account_id first, for the Citus distribution by account_id). Unlike events it
-- keeps its foreign key to sessions: a checkpoint is written once per interval of history, so the
-- key's check costs nothing on any hot path, and its ON DELETE CASCADE removes the checkpoints with
-- the session on every path that deletes one (delete, expiry sweeper, import replacing an expired
-- session, space cleanup).
CREATE TABLE state_checkpoints (
  account_id   text NOT NULL,
  space_id     text NOT NULL,
  user_id      text NOT NULL,
  session_id   text NOT NULL,
  seq          bigint NOT NULL,
  state        jsonb NOT NULL,
  create_time  timestamptz NOT NULL DEFAULT date_trunc('milliseconds', now()),
  PRIMARY KEY (account_id, space_id, user_id, session_id, seq),
  FOREIGN KEY (account_id, space_id, user_id, session_id)
    REFERENCES sessions (account_id, space_id, user_id, session_id) ON DELETE CASCADE
);
