// Appending and reading events (SPEC §4.2–4.4, §4.6). The append is one transaction around the
// locked session row: replay detection, seq assignment, state deltas, size limits and the session
// update either all happen or none do.
import type { Insertable } from 'kysely';
import type { Limits } from '../../config.js';
import type { Database } from '../../db/connect.js';
import type { EventRow, EventsTable, JsonObject } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { decodePageToken, encodePageToken } from '../../http/page-token.js';
import { assertIfMatch } from '../../http/preconditions.js';
import { canonicalJson, sha256 } from '../../lib/canonical-json.js';
import { newEventId } from '../../lib/ids.js';
import { type SessionView, toSessionView } from '../sessions/session.model.js';
import { assertStateWithinLimit, lockSharedStates, saveSharedStates } from '../sessions/sessions.service.js';
import { findSpaceOrThrow } from '../spaces/space-lookup.js';
import { jsonBytes, jsonDepth } from '../../lib/json-measure.js';
import { type ScopedStates, type StoredScope, applyScopedDelta, scopesTouched, withoutTempKeys } from '../state/scoped-state.js';
import type { StateDeltaMode } from '../state/state-delta.js';
import { type EventView, toEventView } from './event.model.js';
import {
  type EventFilters,
  type SessionKey,
  countEvents,
  findEvent,
  findEventsByEventIds,
  findLiveSession,
  insertEvents,
  listEvents,
  lockSessionForUpdate,
  updateSessionAfterAppend,
} from './events.repository.js';
import type { AppendEventsBody, EventInputValue, ListEventsQueryValue } from './events.schemas.js';

export type { SessionKey } from './events.repository.js';

export interface AppendEventsResult {
  /** true when every event of the request was already stored (a retry): nothing was written. */
  replayOnly: boolean;
  events: EventView[];
  session: SessionView;
}

interface PreparedEvent {
  event: EventInputValue;
  /** How errors name the event: `` for a single event, `events[3].` inside a batch. */
  field: string;
  payloadHash: Buffer;
}

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

  return db.transaction().execute(async (trx) => {
    const session = await lockSessionForUpdate(trx, key);
    if (!session) {
      await findSpaceOrThrow(trx, key.accountId, key.spaceId);
      throw sessionNotFound(key);
    }
    const givenIds = [...new Set(prepared.flatMap((p) => (p.event.eventId === undefined ? [] : [p.event.eventId])))];
    const byEventId = new Map<string, { seq: number; payload_hash: Buffer }>();
    const storedBySeq = new Map<number, EventRow>();
    for (const row of await findEventsByEventIds(trx, key, givenIds)) {
      byEventId.set(row.event_id, row);
      storedBySeq.set(row.seq, row);
    }

    let lastSeq = session.event_count;
    const newRows: Insertable<EventsTable>[] = [];
    const resultSeqs: number[] = [];
    const deltas: { delta: JsonObject; mode: StateDeltaMode | undefined }[] = [];
    for (const { event, field, payloadHash } of prepared) {
      // An id seen before (stored, or earlier in this batch) is a replay when the payload is the
      // same: the stored event is answered and its delta is not applied again.
      const earlier = event.eventId === undefined ? undefined : byEventId.get(event.eventId);
      if (earlier) {
        if (!earlier.payload_hash.equals(payloadHash)) throw duplicateEventId(event.eventId!, field);
        resultSeqs.push(earlier.seq);
        continue;
      }
      lastSeq += 1;
      const row = toEventRow(key, event, lastSeq, payloadHash, session.now);
      newRows.push(row);
      byEventId.set(row.event_id, { seq: lastSeq, payload_hash: payloadHash });
      resultSeqs.push(lastSeq);
      const delta = event.actions?.stateDelta;
      if (delta !== undefined) deltas.push({ delta: delta as JsonObject, mode: event.actions?.stateDeltaMode });
    }

    if (newRows.length === 0) {
      // A pure retry writes nothing, so If-Match is not held against it: the caller's earlier
      // attempt (the one whose response was lost) is what moved the revision on.
      const shared = await lockSharedStates(trx, key, new Set());
      return { replayOnly: true, events: resultSeqs.map((seq) => toEventView(storedBySeq.get(seq)!)), session: toSessionView(session, shared) };
    }
    assertIfMatch(ifMatch, session.revision);

    // Lock order (fixed, so appends touching several scopes cannot deadlock): the session row
    // (held since the start), then the user's row if a delta has `user:` keys, then the space's
    // row if one has `app:` keys. Each scope gets its part of every delta, in order.
    const writing = new Set<StoredScope>(deltas.flatMap(({ delta }) => [...scopesTouched(delta)]));
    const shared = await lockSharedStates(trx, key, writing);
    const states = deltas.reduce<ScopedStates>((current, { delta, mode }) => applyScopedDelta(current, delta, mode), { session: session.state, ...shared });
    assertStateWithinLimit(limits, 'session', states.session);
    await saveSharedStates(trx, limits, key, shared, states);

    for (const row of await insertEvents(trx, newRows)) storedBySeq.set(row.seq, row);
    const updated = await updateSessionAfterAppend(trx, key, {
      state: states.session,
      eventCount: lastSeq,
      revision: session.revision + 1,
      updateTime: session.now,
    });
    return { replayOnly: false, events: resultSeqs.map((seq) => toEventView(storedBySeq.get(seq)!)), session: toSessionView(updated, states) };
  });
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

function toEventRow(key: SessionKey, event: EventInputValue, seq: number, payloadHash: Buffer, now: Date): Insertable<EventsTable> {
  const json = (value: unknown) => (value === undefined ? null : JSON.stringify(value));
  return {
    account_id: key.accountId,
    space_id: key.spaceId,
    user_id: key.userId,
    session_id: key.sessionId,
    seq,
    event_id: event.eventId ?? newEventId(),
    invocation_id: event.invocationId ?? null,
    author: event.author,
    content: json(event.content),
    actions: json(storedActions(event.actions)),
    metadata: json(event.metadata),
    extensions: json(event.extensions),
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
  const fingerprint = { spaceId: key.spaceId, userId: key.userId, sessionId: key.sessionId, ...shape };
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
