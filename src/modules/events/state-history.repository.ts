// "State at event N": the session-scoped state replayed inside PostgreSQL, by the same
// apply_state_deltas() the append uses (migrations/0004), from the greatest checkpoint at or below
// the target (migrations/0010) or, without one, from the state the session was created with. Only
// the deltas travel from the events' rows to the function, never to the service.
import { sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import type { JsonObject } from '../../db/schema.js';
import { sessionNotExpiredText } from '../../db/sql-fragments.js';
import type { StateDeltaMode } from '../state/index.js';

export interface ReplayedState {
  /** The session-scoped state after every event with a seq below `beforeSeq`. */
  state: JsonObject;
  /** false when the session's initial state is not stored (then the replay starts from {}). */
  initialStateKnown: boolean;
  /** The seq the replay started after: a checkpoint's, or 0 for the session's initial state. */
  fromSeq: number;
  /** How many events the statement folded (fromSeq, beforeSeq). */
  eventsFolded: number;
}

export interface CheckpointStep {
  /** How many events the statement folded to reach the checkpoint (0 when it already existed). */
  eventsFolded: number;
  /** false when it was not written: already there, the session is gone, or the history has a gap. */
  written: boolean;
}

// The session-scoped part of each event's delta, in seq order, as apply_state_deltas() takes them.
// The `user:`, `app:` and `temp:` keys are left out: the first two are shared with other sessions,
// whose events this replay does not see, and temp: keys are never stored. Events without an object
// stateDelta are counted but fold nothing.
const deltasOf = (events: string) =>
  sql.raw(`COALESCE(jsonb_agg(jsonb_build_object(
             'mode', ${events}.actions -> 'stateDeltaMode',
             'delta', (SELECT COALESCE(jsonb_object_agg(d.key, d.value), '{}'::jsonb)
                       FROM jsonb_each(${events}.actions -> 'stateDelta') AS d
                       WHERE d.key NOT LIKE 'user:%' AND d.key NOT LIKE 'app:%' AND d.key NOT LIKE 'temp:%'))
           ORDER BY ${events}.seq) FILTER (WHERE jsonb_typeof(${events}.actions -> 'stateDelta') = 'object'), '[]'::jsonb)`);

/** The greatest checkpoint seq at or below `atMost`, or 0. Primary key (…, session_id, seq), backwards. */
export async function latestCheckpointSeq(db: Executor, key: SessionKey, atMost: number): Promise<number> {
  const row = await db
    .selectFrom('state_checkpoints')
    .select('seq')
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .where('seq', '<=', atMost)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ? Number(row.seq) : 0;
}

/**
 * Writes the checkpoint after event `seq`, folded from the greatest checkpoint at or below it (or
 * the initial state), in one statement. FOR KEY SHARE on the session row keeps a delete from
 * committing until this statement's transaction has (and skips the row if a delete already did), so
 * a checkpoint is never written for a session replaced under the same key since the statement's
 * snapshot; the append's UPDATE of the row does not conflict with it. Idempotent: a checkpoint
 * another replay wrote first stays (ON CONFLICT DO NOTHING). The count check refuses a history with
 * a gap, where the fold would not be the state after `seq`.
 */
export async function writeStateCheckpoint(db: Executor, key: SessionKey, seq: number): Promise<CheckpointStep> {
  const { accountId, spaceId, userId, sessionId } = key;
  const result = await sql<{ events_folded: string; written: string }>`
    WITH session AS (
      SELECT s.account_id, s.space_id, s.user_id, s.session_id, COALESCE(s.initial_state, '{}'::jsonb) AS initial_state
      FROM sessions AS s
      WHERE s.account_id = ${accountId} AND s.space_id = ${spaceId} AND s.user_id = ${userId} AND s.session_id = ${sessionId}
        AND ${sql.raw(sessionNotExpiredText('s'))}
      FOR KEY SHARE
    ), base AS (
      SELECT c.seq, c.state FROM state_checkpoints AS c
      WHERE c.account_id = ${accountId} AND c.space_id = ${spaceId} AND c.user_id = ${userId} AND c.session_id = ${sessionId}
        AND c.seq <= ${seq}
      ORDER BY c.seq DESC LIMIT 1
    ), start AS (
      SELECT COALESCE((SELECT seq FROM base), 0) AS seq, COALESCE((SELECT state FROM base), session.initial_state) AS state
      FROM session
    ), folded AS (
      SELECT count(*) AS events, ${deltasOf('e')} AS deltas
      FROM events AS e
      WHERE e.account_id = ${accountId} AND e.space_id = ${spaceId} AND e.user_id = ${userId} AND e.session_id = ${sessionId}
        AND e.seq > (SELECT seq FROM start) AND e.seq <= ${seq}
    ), written AS (
      INSERT INTO state_checkpoints (account_id, space_id, user_id, session_id, seq, state)
      SELECT session.account_id, session.space_id, session.user_id, session.session_id, ${seq}, apply_state_deltas(start.state, folded.deltas)
      FROM session, start, folded
      WHERE start.seq < ${seq} AND folded.events = ${seq} - start.seq
      ON CONFLICT DO NOTHING
      RETURNING 1
    )
    SELECT COALESCE((SELECT events FROM folded), 0) AS events_folded, (SELECT count(*) FROM written) AS written
  `.execute(db);
  const row = result.rows[0];
  return { eventsFolded: Number(row?.events_folded ?? 0), written: Number(row?.written ?? 0) > 0 };
}

/**
 * The replay of the state before event `beforeSeq`, as a SELECT of one row (or none, when the
 * session is missing or expired): the greatest checkpoint below it (or the initial state) and the
 * deltas of the events between, read through the events' primary key (account_id, space_id, user_id,
 * session_id, seq) as one range. The range is a subquery ordered by seq: left to itself the planner
 * read it through events_by_time (the same four leading columns; dropped since, migrations/0017, but
 * the eventId key leads with them too), which passes over every event of the session to find the
 * range (11 of 13 ms on a 20,000-event session).
 */
function replaySelect({ accountId, spaceId, userId, sessionId }: SessionKey, beforeSeq: number) {
  // Every table is filtered by the account's constant and the lateral subqueries have a FROM, so
  // that Citus plans the whole statement for the account's shard (a router plan); with a CTE read
  // from a subquery without FROM it refused it ("cannot push down this subquery").
  return sql<{ state: JsonObject; initial_state_known: boolean; from_seq: string; events_folded: string }>`
    SELECT s.initial_state IS NOT NULL AS initial_state_known, COALESCE(base.seq, 0) AS from_seq, folded.events AS events_folded,
           apply_state_deltas(COALESCE(base.state, s.initial_state, '{}'::jsonb), folded.deltas) AS state
    FROM sessions AS s
    LEFT JOIN LATERAL (
      SELECT c.seq, c.state FROM state_checkpoints AS c
      WHERE c.account_id = ${accountId} AND c.space_id = ${spaceId} AND c.user_id = ${userId} AND c.session_id = ${sessionId}
        AND c.seq < ${beforeSeq}
      ORDER BY c.seq DESC LIMIT 1
    ) AS base ON true
    CROSS JOIN LATERAL (
      SELECT count(*) AS events, ${deltasOf('e')} AS deltas
      FROM (
        SELECT e.seq, e.actions FROM events AS e
        WHERE e.account_id = ${accountId} AND e.space_id = ${spaceId} AND e.user_id = ${userId} AND e.session_id = ${sessionId}
          AND e.seq > COALESCE(base.seq, 0) AND e.seq < ${beforeSeq}
        ORDER BY e.seq
      ) AS e
    ) AS folded
    WHERE s.account_id = ${accountId} AND s.space_id = ${spaceId} AND s.user_id = ${userId} AND s.session_id = ${sessionId}
      AND ${sql.raw(sessionNotExpiredText('s'))}
  `;
}

/** The state before event `beforeSeq` (replaySelect); undefined when the session is missing or expired. */
export async function replaySessionState(db: Executor, key: SessionKey, beforeSeq: number): Promise<ReplayedState | undefined> {
  const row = (await replaySelect(key, beforeSeq).execute(db)).rows[0];
  return (
    row && {
      state: row.state,
      initialStateKnown: row.initial_state_known,
      fromSeq: Number(row.from_seq),
      eventsFolded: Number(row.events_folded),
    }
  );
}

/** One step of apply_state_deltas(): an event's session-scoped delta and its mode. */
export interface StateStep {
  mode: StateDeltaMode;
  delta: JsonObject;
}

export interface ReplayedEvent {
  /** The whole session-scoped state right after the event, as JSON text PostgreSQL wrote. */
  stateAfterJson: string;
  /** The state before the event, only at the top-level keys its delta names (those it has). */
  touchedBefore: JsonObject;
  initialStateKnown: boolean;
  eventsFolded: number;
}

/**
 * The state right after event `seq`, whose session-scoped delta is `step` (undefined: none): the
 * replay before it with the step applied, by the same apply_state_deltas(). The whole state stays
 * text, neither parsed nor written again by the service (a state may hold a MiB: bench:neighbours,
 * attack 2); of the state before it, only what the delta's keys held comes back, which is all that
 * the event can have changed.
 */
export async function replayStateAtEvent(db: Executor, key: SessionKey, seq: number, step: StateStep | undefined): Promise<ReplayedEvent | undefined> {
  const steps = JSON.stringify(step ? [step] : []);
  const keys = step ? Object.keys(step.delta) : [];
  // OFFSET 0 keeps the replay a subquery of its own, so that its state is computed once, not once
  // per use above.
  const result = await sql<{ state_after: string; touched_before: JsonObject; initial_state_known: boolean; events_folded: string }>`
    SELECT apply_state_deltas(r.state, ${steps}::jsonb)::text AS state_after,
           (SELECT COALESCE(jsonb_object_agg(k.key, r.state -> k.key), '{}'::jsonb) FROM unnest(${keys}::text[]) AS k(key) WHERE r.state ? k.key) AS touched_before,
           r.initial_state_known, r.events_folded
    FROM (${replaySelect(key, seq)} OFFSET 0) AS r
  `.execute(db);
  const row = result.rows[0];
  return (
    row && {
      stateAfterJson: row.state_after,
      touchedBefore: row.touched_before,
      initialStateKnown: row.initial_state_known,
      eventsFolded: Number(row.events_folded),
    }
  );
}
