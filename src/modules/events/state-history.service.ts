// "State at event N": the session's state right after one event, and what that event changed.
// The replay starts from the greatest checkpoint below N (state-history.repository.ts) and folds at
// most STATE_CHECKPOINT_INTERVAL events per statement; the checkpoints it lacks on the way are
// written first, one short statement each, so a later replay anywhere in that stretch starts near.
// Events never change once stored, so the reads need no common snapshot.
import type { Database } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import type { JsonObject } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { type JsonChange, diffJson } from '../../lib/json-diff.js';
import type { StateAtMetrics } from '../../lib/metrics-registry.js';
import type { SingleFlight } from '../../lib/single-flight.js';
import { type EventView, toEventView } from './event.model.js';
import { findEventBySeq } from './events.repository.js';
import { sessionNotFound } from '../sessions/index.js';
import { splitByScope, type StateDeltaMode, applyStateDelta } from '../state/index.js';
import { latestCheckpointSeq, replaySessionState, replayStateAtEvent, writeStateCheckpoint } from './state-history.repository.js';

/**
 * K: a checkpoint after every K-th event. A replay folds at most K events per statement, and a
 * state-at answer on a history whose checkpoints exist folds at most K (K − 1 in the database, the
 * event itself here). Storage: one copy of the session state per K events (docs/design.md §4.10).
 */
export const STATE_CHECKPOINT_INTERVAL = 1000;

export interface StateAtEvent {
  event: EventView;
  /** The session-scoped keys right after the event, as JSON text PostgreSQL wrote (passed on unparsed). */
  stateJson: string;
  /** What the event changed in them. */
  changes: JsonChange[];
  /** The event's own delta to the shared user: and app: states (their values at that time are not kept). */
  sharedDelta: { user: JsonObject; app: JsonObject };
  initialStateKnown: boolean;
}

/**
 * `checkpointWriters`: one walk at a time per session on this instance. The first replays over a
 * long history all lack the same checkpoints; each writing them (a fold of K events over the whole
 * state per step) would multiply that work by the replays in flight, while the first walk's
 * checkpoints serve them all.
 */
export async function getStateAtEvent(db: Database, metrics: StateAtMetrics, key: SessionKey, seq: number, checkpointWriters: SingleFlight): Promise<StateAtEvent> {
  const row = await findEventBySeq(db, key, seq);
  if (row) {
    const session = JSON.stringify([key.accountId, key.spaceId, key.userId, key.sessionId]);
    // Waits out another replay's walk (it may stop short of this seq), then walks itself: after
    // the first, a walk finds its checkpoints written and only reads which is the latest.
    for (let walked = false; !walked; ) {
      await checkpointWriters(session, async () => {
        walked = true;
        await writeMissingCheckpoints(db, metrics, key, seq - 1);
      });
    }
  }
  const event = row && toEventView(row);
  const delta = splitByScope((event?.actions?.stateDelta ?? {}) as JsonObject);
  const mode = (event?.actions?.stateDeltaMode ?? 'merge-patch') as StateDeltaMode;
  const step = Object.keys(delta.session).length > 0 ? { mode, delta: delta.session } : undefined;
  const replayed = event && (await replayStateAtEvent(db, key, seq, step));
  if (!event || !replayed) {
    // Tells a missing session (or space) from a missing event.
    const missing = await replaySessionState(db, key, 0);
    if (!missing) throw await sessionNotFound(db, key);
    throw new AppError('ResourceNotFound.Event', `Session ${key.sessionId} has no event with seq ${seq}.`);
  }
  metrics.statementEvents.observe(replayed.eventsFolded);
  // Only the keys the delta names can have changed: the diff of those, before and after, is the
  // diff of the whole state, in the same order (the state before's key order, then added keys).
  const touchedAfter = applyStateDelta(replayed.touchedBefore, delta.session, mode);
  return {
    event,
    stateJson: replayed.stateAfterJson,
    changes: diffJson(replayed.touchedBefore, touchedAfter),
    sharedDelta: { user: delta.user, app: delta.app },
    initialStateKnown: replayed.initialStateKnown,
  };
}

/**
 * Writes the checkpoints at the multiples of K between the greatest one at or below `upTo` and
 * `upTo`, in order, each folded from the one before. A step that writes nothing (another replay
 * wrote it, or the session went away) does not stop the walk: the final replay starts from whatever
 * checkpoint exists.
 */
async function writeMissingCheckpoints(db: Database, metrics: StateAtMetrics, key: SessionKey, upTo: number): Promise<void> {
  const interval = STATE_CHECKPOINT_INTERVAL;
  const from = await latestCheckpointSeq(db, key, upTo);
  for (let next = (Math.floor(from / interval) + 1) * interval; next <= upTo; next += interval) {
    const step = await writeStateCheckpoint(db, key, next);
    metrics.statementEvents.observe(step.eventsFolded);
    if (step.written) metrics.checkpointsWritten.inc();
  }
}
