// "State at event N" (issue 13): the session's state right after one event, and what that event
// changed. Round trips: two reads (the event, then the replay up to it); nothing is written.
// Events never change once stored, so the two need no common snapshot.
import type { Database } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import type { JsonObject } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { type JsonChange, diffJson } from '../../lib/json-diff.js';
import { type EventView, toEventView } from '../events/event.model.js';
import { findEventBySeq } from '../events/events.repository.js';
import { sessionNotFound } from '../sessions/session-not-found.js';
import { splitByScope } from './scoped-state.js';
import { type StateDeltaMode, applyStateDelta } from './state-delta.js';
import { replaySessionState } from './state-history.repository.js';

export interface StateAtEvent {
  event: EventView;
  /** The session-scoped keys right after the event. */
  state: JsonObject;
  /** What the event changed in them. */
  changes: JsonChange[];
  /** The event's own delta to the shared user: and app: states (their values at that time are not kept). */
  sharedDelta: { user: JsonObject; app: JsonObject };
  initialStateKnown: boolean;
}

export async function getStateAtEvent(db: Database, key: SessionKey, seq: number): Promise<StateAtEvent> {
  const row = await findEventBySeq(db, key, seq);
  const replayed = row && (await replaySessionState(db, key, seq));
  if (!replayed) {
    // Tells a missing session (or space) from a missing event.
    const missing = await replaySessionState(db, key, 0);
    if (!missing) throw await sessionNotFound(db, key);
    throw new AppError('ResourceNotFound.Event', `Session ${key.sessionId} has no event with seq ${seq}.`);
  }
  const event = toEventView(row);
  const delta = splitByScope((event.actions?.stateDelta ?? {}) as JsonObject);
  const mode = (event.actions?.stateDeltaMode ?? 'merge-patch') as StateDeltaMode;
  const after = applyStateDelta(replayed.state, delta.session, mode);
  return {
    event,
    state: after,
    changes: diffJson(replayed.state, after),
    sharedDelta: { user: delta.user, app: delta.app },
    initialStateKnown: replayed.initialStateKnown,
  };
}
