// Appending and reading events (SPEC §4.2–4.4, §4.6). The append is one transaction around the
// locked session row: replay detection, seq assignment, state deltas, size limits and the session
// update either all happen or none do.
import type { Transaction } from 'kysely';
import type { Limits } from '../../config.js';
import type { Database } from '../../db/connect.js';
import type { DB, EventRow, JsonObject, SessionRow } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { decodePageToken, encodePageToken } from '../../http/page-token.js';
import { assertIfMatch } from '../../http/preconditions.js';
import { canonicalJson, sha256 } from '../../lib/canonical-json.js';
import { newEventId } from '../../lib/ids.js';
import { type SessionView, type SharedStates, toSessionView } from '../sessions/session.model.js';
import { assertStateWithinLimit, lockSharedStates, lockWrittenSharedStates, saveSharedStates } from '../sessions/sessions.service.js';
import { findSpaceOrThrow } from '../spaces/space-lookup.js';
import { jsonBytes, jsonDepth } from '../../lib/json-measure.js';
import { type ScopedStates, type StoredScope, applyScopedDelta, scopesTouched, withoutTempKeys } from '../state/scoped-state.js';
import { type EventView, toEventView } from './event.model.js';
import {
  type AppendWrite,
  type AppendWriteResult,
  type EventFilters,
  type SessionKey,
  countEvents,
  findEvent,
  findEventsByEventIds,
  findLiveSession,
  listEvents,
  lockSessionForUpdate,
  writeAppend,
} from './events.repository.js';
import type { AppendEventsBody, EventInputValue, ListEventsQueryValue } from './events.schemas.js';

export type { SessionKey } from './events.repository.js';

export interface AppendEventsResult {
  /** true when every event of the request was already stored (a retry): nothing was written. */
  replayOnly: boolean;
  /** How many of `events` this request stored: they hold the session's newest seq numbers. */
  writtenCount: number;
  /** The serialized size of each state this request wrote, as the size limit measured it. */
  stateBytes: Partial<Record<StoredScope, number>>;
  events: EventView[];
  session: SessionView;
}

interface PreparedEvent {
  event: EventInputValue;
  /** How errors name the event: `` for a single event, `events[3].` inside a batch. */
  field: string;
  payloadHash: Buffer;
}

type LockedSession = SessionRow & { now: Date };

/**
 * Appends in one transaction around the locked session row. The usual append costs four round
 * trips: BEGIN, the session lock, one statement that checks the eventIds, inserts and updates
 * (writeAppend), COMMIT. It is first planned as if no eventId of the request were stored yet; when
 * one is (a retry), writeAppend writes nothing and the append is planned again with the stored
 * events known, still under the same lock.
 */
export async function appendEvents(
  db: Database,
  limits: Limits,
  key: SessionKey,
  body: AppendEventsBody,
  ifMatch: number[] | '*' | undefined,
): Promise<AppendEventsResult> {
  const inputs = 'events' in body ? body.events : [body];
  // Everything that can be judged from the request alone is checked before touching the database.
  const prepared = inputs.map((event, index) => prepareEvent(event, 'events' in body ? `events[${index}].` : '', limits));
  const givenIds = [...new Set(prepared.flatMap((p) => (p.event.eventId === undefined ? [] : [p.event.eventId])))];

  return db.transaction().execute(async (trx) => {
    const session = await lockSessionForUpdate(trx, key);
    if (!session) {
      await findSpaceOrThrow(trx, key.accountId, key.spaceId);
      throw sessionNotFound(key);
    }
    // Lock order (fixed, so appends touching several scopes cannot deadlock): the session row
    // (held since the start), then the user's row if a delta has `user:` keys, then the space's
    // row if one has `app:` keys.
    const locked = await lockWrittenSharedStates(trx, key, sharedScopesWrittenBy(prepared));

    let plan: AppendPlan | undefined;
    try {
      plan = planAppend(key, session, prepared, new Map(), locked, limits, ifMatch);
    } catch (error) {
      // A retry is answered even where a new append would be refused (If-Match, limits): that is
      // decided below, once the stored events are known.
      if (!(error instanceof AppError) || givenIds.length === 0) throw error;
    }
    if (plan?.write) {
      const written = await writeAppend(trx, key, plan.write);
      if (!written.replayed) return finishAppend(trx, limits, key, session, locked, plan, written);
    }

    // Some eventId of the request is already stored: nothing has been written yet.
    const stored = new Map((await findEventsByEventIds(trx, key, givenIds)).map((row) => [row.event_id, row]));
    plan = planAppend(key, session, prepared, stored, locked, limits, ifMatch);
    if (!plan.write) {
      const shared = await lockSharedStates(trx, key, new Set());
      return { replayOnly: true, writtenCount: 0, stateBytes: {}, events: plan.results.map(toEventView), session: toSessionView(session, shared) };
    }
    const written = await writeAppend(trx, key, plan.write);
    if (written.replayed) throw new AppError('InternalError', 'The events changed under the session lock.');
    return finishAppend(trx, limits, key, session, locked, plan, written);
  });
}

interface AppendPlan {
  /** The event each input stands for, in request order: a new one, or the stored one it replays. */
  results: EventRow[];
  /** The states after the new events' deltas; shared scopes not locked stay as placeholders. */
  states: ScopedStates;
  /** Absent when every input replays a stored event: nothing to write. */
  write?: AppendWrite;
  /** With `write`: the size of the session's new state, as the limit measured it. */
  sessionStateBytes?: number;
}

/**
 * Decides what the append writes, without I/O: seq numbers, replays (an eventId in `stored`, or
 * earlier in the batch, with the same payload), the state deltas in order, If-Match and the state
 * size limits. Throws the request's 4xx.
 */
function planAppend(
  key: SessionKey,
  session: LockedSession,
  prepared: PreparedEvent[],
  stored: Map<string, EventRow>,
  locked: Partial<SharedStates>,
  limits: Limits,
  ifMatch: number[] | '*' | undefined,
): AppendPlan {
  const seen = new Map<string, { row: EventRow; payloadHash: Buffer }>();
  for (const row of stored.values()) seen.set(row.event_id, { row, payloadHash: row.payload_hash });
  let lastSeq = session.event_count;
  const results: EventRow[] = [];
  const newRows: EventRow[] = [];
  let states: ScopedStates = { session: session.state, user: locked.user ?? {}, app: locked.app ?? {} };
  for (const { event, field, payloadHash } of prepared) {
    // An id seen before (stored, or earlier in this batch) is a replay when the payload is the
    // same: the stored event is answered and its delta is not applied again.
    const earlier = event.eventId === undefined ? undefined : seen.get(event.eventId);
    if (earlier) {
      if (!earlier.payloadHash.equals(payloadHash)) throw duplicateEventId(event.eventId!, field);
      results.push(earlier.row);
      continue;
    }
    lastSeq += 1;
    const row = newEventRow(key, event, lastSeq, payloadHash, session.now);
    newRows.push(row);
    seen.set(row.event_id, { row, payloadHash });
    results.push(row);
    const delta = event.actions?.stateDelta;
    if (delta !== undefined) states = applyScopedDelta(states, delta as JsonObject, event.actions?.stateDeltaMode);
  }
  // A pure retry writes nothing, so If-Match is not held against it: the caller's earlier attempt
  // (the one whose response was lost) is what moved the revision on.
  if (newRows.length === 0) return { results, states };
  assertIfMatch(ifMatch, session.revision);
  const stateJson = JSON.stringify(states.session);
  const sessionStateBytes = assertStateWithinLimit(limits, 'session', states.session, stateJson);
  return {
    results,
    states,
    sessionStateBytes,
    write: { events: newRows, stateJson, eventCount: lastSeq, revision: session.revision + 1, updateTime: session.now },
  };
}

/** After writeAppend: the shared states the deltas changed, then the answer. */
async function finishAppend(
  trx: Transaction<DB>,
  limits: Limits,
  key: SessionKey,
  session: LockedSession,
  locked: Partial<SharedStates>,
  plan: AppendPlan,
  written: AppendWriteResult,
): Promise<AppendEventsResult> {
  const write = plan.write!;
  // Scopes that were not locked are not written by any delta: the view shows them as just read.
  const before: SharedStates = { user: locked.user ?? written.userState, app: locked.app ?? written.appState };
  const after: ScopedStates = {
    session: plan.states.session,
    user: locked.user ? plan.states.user : written.userState,
    app: locked.app ? plan.states.app : written.appState,
  };
  const sharedStateBytes = await saveSharedStates(trx, limits, key, before, after);
  const updated: SessionRow = { ...session, state: plan.states.session, event_count: write.eventCount, revision: write.revision, update_time: write.updateTime };
  return {
    replayOnly: false,
    writtenCount: write.events.length,
    stateBytes: { session: plan.sessionStateBytes!, ...sharedStateBytes },
    events: plan.results.map(toEventView),
    session: toSessionView(updated, after),
  };
}

/** The user and app scopes that some delta of the request writes (the session row is locked anyway). */
function sharedScopesWrittenBy(prepared: PreparedEvent[]): Set<StoredScope> {
  const scopes = new Set<StoredScope>();
  for (const { event } of prepared) {
    const delta = event.actions?.stateDelta;
    if (delta === undefined) continue;
    for (const scope of scopesTouched(delta as JsonObject)) if (scope !== 'session') scopes.add(scope);
  }
  return scopes;
}

function prepareEvent(event: EventInputValue, field: string, limits: Limits): PreparedEvent {
  const delta = event.actions?.stateDelta;
  if (delta !== undefined) {
    const depth = jsonDepth(delta);
    if (depth > limits.stateDeltaDepth) {
      throw invalidStateDelta(`${field}actions.stateDelta`, `is nested ${depth} levels deep; at most ${limits.stateDeltaDepth} are allowed`);
    }
    const bytes = jsonBytes(delta);
    if (bytes > limits.stateDeltaBytes) {
      throw invalidStateDelta(`${field}actions.stateDelta`, `is ${bytes} bytes serialized; at most ${limits.stateDeltaBytes} are allowed`);
    }
  }
  // The hash covers the event exactly as sent (key order aside): a retry must resend the same event.
  const serialized = canonicalJson(event);
  const bytes = Buffer.byteLength(serialized, 'utf8');
  if (bytes > limits.eventBytes) {
    const name = field ? field.slice(0, -1) : 'The event';
    throw new AppError('LimitExceeded.Event', `${name} is ${bytes} bytes serialized; the limit is ${limits.eventBytes}.`, {
      details: { field: field ? field.slice(0, -1) : 'body', eventBytes: bytes, limit: limits.eventBytes },
    });
  }
  return { event, field, payloadHash: sha256(serialized) };
}

/** The event as it will be stored (and answered: the response is built from it, not read back). */
function newEventRow(key: SessionKey, event: EventInputValue, seq: number, payloadHash: Buffer, now: Date): EventRow {
  return {
    account_id: key.accountId,
    space_id: key.spaceId,
    user_id: key.userId,
    session_id: key.sessionId,
    seq,
    event_id: event.eventId ?? newEventId(),
    invocation_id: event.invocationId ?? null,
    author: event.author,
    content: (event.content as JsonObject | undefined) ?? null,
    actions: (storedActions(event.actions) as JsonObject | undefined) ?? null,
    metadata: (event.metadata as JsonObject | undefined) ?? null,
    extensions: (event.extensions as JsonObject | undefined) ?? null,
    error_code: event.errorCode ?? null,
    error_message: event.errorMessage ?? null,
    event_time: event.timestamp === undefined ? now : new Date(event.timestamp),
    create_time: now,
    payload_hash: payloadHash,
  };
}

/** `temp:` keys of a stateDelta are never stored, not even in the event (the payload hash still covers them). */
function storedActions(actions: EventInputValue['actions']): EventInputValue['actions'] {
  if (actions?.stateDelta === undefined) return actions;
  return { ...actions, stateDelta: withoutTempKeys(actions.stateDelta as JsonObject) };
}

export interface ListEventsResult {
  events: EventView[];
  nextPageToken?: string;
  totalCount?: number;
}

export async function listSessionEvents(db: Database, key: SessionKey, query: ListEventsQueryValue): Promise<ListEventsResult> {
  const { pageSize, pageToken, includeTotal, ...shape } = query;
  // The token is bound to the session and to everything that shapes the result except the page size.
  const fingerprint = { accountId: key.accountId, spaceId: key.spaceId, userId: key.userId, sessionId: key.sessionId, ...shape };
  const cursorSeq = pageToken === undefined ? undefined : seqFromToken(decodePageToken(pageToken, fingerprint));
  await requireLiveSession(db, key);

  const filters: EventFilters = {
    afterSeq: query.afterSeq,
    beforeSeq: query.beforeSeq,
    after: query.after === undefined ? undefined : new Date(query.after),
    before: query.before === undefined ? undefined : new Date(query.before),
    author: query.author,
  };
  const rows = await listEvents(db, key, filters, { order: query.order, cursorSeq, limit: pageSize + 1 });
  const page = rows.slice(0, pageSize);
  const result: ListEventsResult = { events: page.map(toEventView) };
  if (rows.length > pageSize) result.nextPageToken = encodePageToken(fingerprint, [page[page.length - 1]!.seq]);
  if (includeTotal) result.totalCount = await countEvents(db, key, filters);
  return result;
}

export async function getSessionEvent(db: Database, key: SessionKey, eventId: string): Promise<EventView> {
  await requireLiveSession(db, key);
  const row = await findEvent(db, key, eventId);
  if (!row) throw new AppError('ResourceNotFound.Event', `Event ${eventId} was not found in session ${key.sessionId}.`);
  return toEventView(row);
}

/** A missing or expired session is a 404; so is the session of an unknown (or another account's) space. */
async function requireLiveSession(db: Database, key: SessionKey): Promise<void> {
  if (await findLiveSession(db, key)) return;
  await findSpaceOrThrow(db, key.accountId, key.spaceId);
  throw sessionNotFound(key);
}

function seqFromToken(position: (string | number)[]): number {
  const [seq] = position;
  if (position.length !== 1 || typeof seq !== 'number' || !Number.isSafeInteger(seq)) {
    throw new AppError('InvalidParameter.PageToken', 'pageToken is invalid: it is not a token of this list.', {
      details: { issues: [{ field: 'pageToken', message: 'it is not a token of this list' }] },
    });
  }
  return seq;
}

function sessionNotFound(key: SessionKey): AppError {
  return new AppError('ResourceNotFound.Session', `Session ${key.sessionId} of user ${key.userId} was not found.`);
}

function duplicateEventId(eventId: string, field: string): AppError {
  return new AppError('InvalidParameter.EventIdDuplicate', `Event ${eventId} already exists in this session with a different payload.`, {
    details: { field: `${field}eventId`, eventId },
  });
}

function invalidStateDelta(field: string, message: string): AppError {
  return new AppError('InvalidParameter.StateDelta', `${field}: ${message}.`, { details: { issues: [{ field, message }] } });
}
