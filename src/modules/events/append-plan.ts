// The pure half of an append (no I/O): everything decided from the request alone before the
// database is reached, what is sent to append_events(), and, for a retry, which events of the
// request replay stored ones. Unit-tested in test/unit/append-plan.test.ts.
import type { Limits } from '../../config.js';
import type { EventRow, JsonObject } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { canonicalJson, sha256Hex } from '../../lib/canonical-json.js';
import { newEventId } from '../../lib/ids.js';
import { jsonBytes, jsonDepth } from '../../lib/json-measure.js';
import { STORED_SCOPES, type StoredScope, splitByScope, withoutTempKeys, type StateDeltaMode } from '../state/index.js';
import type { EventViewRow } from './event.model.js';
import type { AppendEventsBody, EventInputValue } from './events.schemas.js';

/** One event of the request, checked and given its id and payload hash. */
export interface PreparedEvent {
  input: EventInputValue;
  /** The client's eventId, or a new one: every event is sent with an id. */
  eventId: string;
  /** How errors name the event: `` for a single event, `events[3].` inside a batch. */
  field: string;
  /** SHA-256 of the event's canonical JSON as sent, in hex (as append_events() takes it): a retry must resend the same event. */
  payloadHash: string;
  /** The serialized size of its stateDelta as the limit measured it (0 without one), for the metrics. */
  deltaBytes: number;
}

export interface PreparedAppend {
  events: PreparedEvent[];
  /** The eventIds the client gave (a retry can only be recognised by those), without repeats. */
  givenIds: string[];
  /** The same eventId twice in the request: only the locked path can answer the second as a replay. */
  repeatsAnId: boolean;
}

/**
 * Checks what can be judged from the request alone (delta depth and size, event size) and gives
 * each event its id and payload hash. Throws the request's 4xx.
 */
export function prepareAppend(body: AppendEventsBody, limits: Limits): PreparedAppend {
  const inputs = 'events' in body ? body.events : [body];
  const events = inputs.map((input, index) => prepareEvent(input, 'events' in body ? `events[${index}].` : '', limits));
  const given = events.flatMap((event) => (event.input.eventId === undefined ? [] : [event.input.eventId]));
  const givenIds = [...new Set(given)];
  return { events, givenIds, repeatsAnId: givenIds.length !== given.length };
}

function prepareEvent(input: EventInputValue, field: string, limits: Limits): PreparedEvent {
  const delta = input.actions?.stateDelta;
  let deltaBytes = 0;
  if (delta !== undefined) {
    const depth = jsonDepth(delta);
    if (depth > limits.stateDeltaDepth) {
      throw invalidStateDelta(`${field}actions.stateDelta`, `is nested ${depth} levels deep; at most ${limits.stateDeltaDepth} are allowed`);
    }
    deltaBytes = jsonBytes(delta);
    if (deltaBytes > limits.stateDeltaBytes) {
      throw invalidStateDelta(`${field}actions.stateDelta`, `is ${deltaBytes} bytes serialized; at most ${limits.stateDeltaBytes} are allowed`);
    }
  }
  // The hash covers the event exactly as sent (key order aside).
  const serialized = canonicalJson(input);
  const bytes = Buffer.byteLength(serialized, 'utf8');
  if (bytes > limits.eventBytes) {
    const name = field ? field.slice(0, -1) : 'The event';
    throw new AppError('LimitExceeded.Event', `${name} is ${bytes} bytes serialized; the limit is ${limits.eventBytes}.`, {
      details: { field: field ? field.slice(0, -1) : 'body', eventBytes: bytes, limit: limits.eventBytes },
    });
  }
  return { input, eventId: input.eventId ?? newEventId(), field, payloadHash: sha256Hex(serialized), deltaBytes };
}

/** One scope's part of an event's delta, as append_events() folds it. */
export interface ScopedDelta {
  delta: JsonObject;
  mode: StateDeltaMode;
}

/** An event as append_events() takes it (one element of its JSON array argument). */
export type EventDocument = {
  eventId: string;
  author: string;
  invocationId?: string;
  content?: unknown;
  actions?: unknown;
  metadata?: unknown;
  extensions?: unknown;
  errorCode?: string;
  errorMessage?: string;
  /** ISO 8601 at millisecond precision; absent: the append's time. */
  timestamp?: string;
  payloadHash: string;
} & Partial<Record<StoredScope, ScopedDelta>>;

/**
 * The event as stored: `temp:` keys of its delta are never stored, not even in the event (the
 * payload hash still covers them), and its delta goes to each scope it touches.
 */
export function eventDocument(event: PreparedEvent): EventDocument {
  const { input } = event;
  const document: EventDocument = { eventId: event.eventId, author: input.author, payloadHash: event.payloadHash };
  if (input.invocationId !== undefined) document.invocationId = input.invocationId;
  if (input.content !== undefined) document.content = input.content;
  if (input.metadata !== undefined) document.metadata = input.metadata;
  if (input.extensions !== undefined) document.extensions = input.extensions;
  if (input.errorCode !== undefined) document.errorCode = input.errorCode;
  if (input.errorMessage !== undefined) document.errorMessage = input.errorMessage;
  if (input.timestamp !== undefined) document.timestamp = new Date(input.timestamp).toISOString();
  const actions = input.actions;
  if (actions === undefined) return document;
  const delta = actions.stateDelta as JsonObject | undefined;
  document.actions = delta === undefined ? actions : { ...actions, stateDelta: withoutTempKeys(delta) };
  if (delta !== undefined) {
    const mode = actions.stateDeltaMode ?? 'merge-patch';
    const parts = splitByScope(delta);
    for (const scope of STORED_SCOPES) {
      if (Object.keys(parts[scope]).length > 0) document[scope] = { delta: parts[scope], mode };
    }
  }
  return document;
}

/**
 * The documents of one append, each scope's deltas folded into one merge-patch step on the last
 * event that has one, where that step gives the same state as the steps in order: when no delta
 * holds an object at the top (an object merges into what is there) and none is a `replace` with a
 * `null` (stored as a value, which merge-patch cannot say), each key ends as its last step leaves
 * it. The database then merges one step (migrations/0016: one call, no query of the steps) instead
 * of folding every event's (issue 24: an append of 10 events). Only the scope parts change: they
 * are the merge's input and are never stored; each event keeps its own `actions.stateDelta`.
 */
export function foldedDocuments(documents: EventDocument[]): EventDocument[] {
  let folded = documents;
  for (const scope of STORED_SCOPES) {
    const carriers = documents.flatMap((document, index) => (document[scope] === undefined ? [] : [index]));
    if (carriers.length < 2) continue;
    const delta = lastValuePerKey(carriers.map((index) => documents[index]![scope]!));
    if (delta === undefined) continue;
    if (folded === documents) folded = documents.map((document) => ({ ...document }));
    for (const index of carriers) delete folded[index]![scope];
    folded[carriers.at(-1)!]![scope] = { delta, mode: 'merge-patch' };
  }
  return folded;
}

/** The one merge-patch delta the steps amount to, or undefined where there is none (see foldedDocuments). */
function lastValuePerKey(steps: ScopedDelta[]): JsonObject | undefined {
  const delta: JsonObject = {};
  for (const step of steps) {
    for (const key of Object.keys(step.delta)) {
      const value = step.delta[key]!;
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) return undefined;
      if (value === null && step.mode === 'replace') return undefined;
      Object.defineProperty(delta, key, { value, writable: true, enumerable: true, configurable: true }); // `__proto__` too, as a key
    }
  }
  return delta;
}

/** The event a new document became, for the answer: built from what was written, not read back. */
export function writtenEventRow(document: EventDocument, seq: number, appendTime: Date): EventViewRow {
  return {
    seq,
    event_id: document.eventId,
    invocation_id: document.invocationId ?? null,
    author: document.author,
    content: (document.content as JsonObject | undefined) ?? null,
    actions: (document.actions as JsonObject | undefined) ?? null,
    metadata: (document.metadata as JsonObject | undefined) ?? null,
    extensions: (document.extensions as JsonObject | undefined) ?? null,
    error_code: document.errorCode ?? null,
    error_message: document.errorMessage ?? null,
    event_time: document.timestamp === undefined ? appendTime : new Date(document.timestamp),
    create_time: appendTime,
  };
}

/** Each event of a retried request: a stored event it replays, or the index of a new one. */
export type ReplayPlan = { answers: ({ stored: EventRow } | { fresh: number })[]; fresh: PreparedEvent[] };

/**
 * Which events replay a stored one (same eventId and payload; also an eventId earlier in the same
 * request) and which are new. The same eventId with another payload is a 409.
 */
export function planReplays(events: PreparedEvent[], stored: ReadonlyMap<string, EventRow>): ReplayPlan {
  const answers: ReplayPlan['answers'] = [];
  const fresh: PreparedEvent[] = [];
  const seen = new Map<string, { payloadHash: string; answer: ReplayPlan['answers'][number] }>();
  for (const row of stored.values()) seen.set(row.event_id, { payloadHash: row.payload_hash.toString('hex'), answer: { stored: row } });
  for (const event of events) {
    const earlier = seen.get(event.eventId);
    if (earlier) {
      if (earlier.payloadHash !== event.payloadHash) throw duplicateEventId(event.eventId, event.field);
      answers.push(earlier.answer);
      continue;
    }
    const answer = { fresh: fresh.length };
    fresh.push(event);
    seen.set(event.eventId, { payloadHash: event.payloadHash, answer });
    answers.push(answer);
  }
  return { answers, fresh };
}

function duplicateEventId(eventId: string, field: string): AppError {
  return new AppError('InvalidParameter.EventIdDuplicate', `Event ${eventId} already exists in this session with a different payload.`, {
    details: { field: `${field}eventId`, eventId },
  });
}

function invalidStateDelta(field: string, message: string): AppError {
  return new AppError('InvalidParameter.StateDelta', `${field}: ${message}.`, { details: { issues: [{ field, message }] } });
}
