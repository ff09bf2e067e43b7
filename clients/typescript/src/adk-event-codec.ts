// ADK Event <-> the service's event, losslessly. What the service's event schema holds (id, author,
// text / thought / function call / function response / inline data parts, stateDelta, custom
// metadata, error fields, the millisecond timestamp) goes to its own fields, so the server's
// context window, function-call pairing and admin views see the conversation. Everything else of
// the ADK event (branch, usage metadata, artifactDelta, transferToAgent, thought signatures, …)
// rides in `extensions.adk`, the residue, and decoding puts the two back together.
import type { Event } from '@google/adk';
import type { components } from './generated/openapi.js';

type ServiceEventInput = components['schemas']['AppendEvent'];
type ServiceEvent = components['schemas']['Event'];
type ServicePart = NonNullable<ServiceEventInput['content']>['parts'][number];
type JsonObject = components['schemas']['JsonObject'];
type Residue = Record<string, unknown>;

/** The key of `extensions` that holds what the service's own fields cannot. */
export const ADK_RESIDUE_KEY = 'adk';
/** The service's author when the ADK event has none (its schema requires one); the residue records the absence. */
const NO_AUTHOR = 'unknown';
const TEMP_PREFIX = 'temp:';
/** ADK's brand on the objects createEvent() makes (a registered symbol, so this is ADK's own). */
const EVENT_BRAND = Symbol.for('google.adk.event');
const MAX_SHORT = 128;
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const shortString = (value: unknown, max = MAX_SHORT): value is string => typeof value === 'string' && value.length >= 1 && value.length <= max;

/** The body to append for an ADK event; `temp:` keys of its stateDelta are left out (ADK never stores them). */
export function encodeAdkEvent(event: Event): ServiceEventInput {
  const { id, invocationId, author, content, actions, customMetadata, errorCode, errorMessage, timestamp, ...others } = event;
  const residue: Residue = { ...others };
  const absent: string[] = [];
  const body: ServiceEventInput = { eventId: id, author: NO_AUTHOR };

  if (shortString(invocationId)) body.invocationId = invocationId;
  else if (invocationId !== '') residue.invocationId = invocationId;
  if (shortString(author)) body.author = author;
  else if (author === undefined) absent.push('author');
  else residue.author = author;

  if (content !== undefined) {
    const encoded = encodeContent(content);
    if (encoded.content) body.content = encoded.content;
    Object.assign(residue, encoded.residue);
  }
  if (actions !== undefined) {
    const { stateDelta, ...otherActions } = (actions ?? {}) as unknown as Record<string, unknown>;
    const storedDelta = isObject(stateDelta) ? withoutTempKeys(stateDelta) : undefined;
    const restActions: Residue = { ...otherActions };
    // ADK's stateDelta semantics: each top-level key replaces the stored value, null included.
    if (storedDelta && Object.keys(storedDelta).length > 0) body.actions = { stateDelta: storedDelta as JsonObject, stateDeltaMode: 'replace' };
    else restActions.stateDelta = storedDelta ?? stateDelta;
    if (!isObject(actions)) residue.actions = actions;
    else if (Object.keys(restActions).length > 0) residue.actions = restActions;
  }
  if (isObject(customMetadata)) body.metadata = customMetadata as JsonObject;
  else if (customMetadata !== undefined) residue.customMetadata = customMetadata;
  if (shortString(errorCode)) body.errorCode = errorCode;
  else if (errorCode !== undefined) residue.errorCode = errorCode;
  if (typeof errorMessage === 'string') body.errorMessage = errorMessage;
  else if (errorMessage !== undefined) residue.errorMessage = errorMessage;

  // The service keeps milliseconds; a finer (or unusable) timestamp is kept exactly in the residue,
  // and the service gets its millisecond floor, which keeps time filters and order right.
  const instant = typeof timestamp === 'number' && Number.isFinite(timestamp) ? new Date(Math.floor(timestamp)) : undefined;
  if (instant && !Number.isNaN(instant.getTime()) && instant.getUTCFullYear() >= 1 && instant.getUTCFullYear() <= 9999) {
    body.timestamp = instant.toISOString();
    if (!Number.isInteger(timestamp)) residue.timestamp = timestamp;
  } else {
    residue.timestamp = timestamp;
  }

  if (absent.length > 0) residue['$absent'] = absent;
  const stored = JSON.parse(JSON.stringify(residue)) as Residue; // what JSON keeps of it: no undefined, no symbols
  if (Object.keys(stored).length > 0) body.extensions = { [ADK_RESIDUE_KEY]: stored as JsonObject };
  return body;
}

/** The ADK event a stored event was encoded from. */
export function decodeAdkEvent(stored: ServiceEvent): Event {
  const { $absent: absent, invocationId, author, actions, timestamp, $parts: parts, content, ...others } = (stored.extensions?.[ADK_RESIDUE_KEY] ?? {}) as Residue;
  const event: Record<string | symbol, unknown> = { ...others, id: stored.eventId };
  event.invocationId = stored.invocationId ?? invocationId ?? '';
  const missing = new Set(Array.isArray(absent) ? absent : []);
  if (!missing.has('author')) event.author = author !== undefined ? author : stored.author;

  if (stored.content) event.content = decodeContent(stored.content, parts as PartResidue[] | undefined, content as Residue | undefined);
  else if (content !== undefined) event.content = content;

  const storedDelta = stored.actions?.stateDelta;
  if (storedDelta !== undefined) event.actions = { ...(isObject(actions) ? actions : {}), stateDelta: storedDelta };
  else if (actions !== undefined) event.actions = actions;

  if (stored.metadata !== undefined) event.customMetadata = stored.metadata;
  if (stored.errorCode !== undefined) event.errorCode = stored.errorCode;
  if (stored.errorMessage !== undefined) event.errorMessage = stored.errorMessage;
  event.timestamp = timestamp !== undefined ? timestamp : Date.parse(stored.timestamp);
  event[EVENT_BRAND] = true; // what ADK's isEvent() checks; JSON cannot carry it
  return event as unknown as Event;
}

/**
 * One entry per ADK part, in order: null when the service's part is the whole part, `{ extra }`
 * when the service holds part of it (the rest is `extra`), `{ part }` when it holds none of it (a
 * part of a kind the service does not know, e.g. executableCode).
 */
type PartResidue = null | { extra: Residue } | { part: unknown };

function encodeContent(content: unknown): { content?: ServiceEventInput['content']; residue: Residue } {
  if (!isObject(content) || !Array.isArray(content.parts)) return { residue: { content } };
  const { role, parts, ...rest } = content;
  const servicePart: ServicePart[] = [];
  const partResidue: PartResidue[] = [];
  for (const part of parts as unknown[]) {
    const { kept, extra } = splitPart(part);
    if (kept) servicePart.push(kept);
    partResidue.push(!kept ? { part } : extra ? { extra } : null);
  }
  const residueContent: Residue = { ...rest };
  const encoded: ServiceEventInput['content'] = { parts: servicePart };
  if (shortString(role)) encoded.role = role;
  else if (role !== undefined) residueContent.role = role;
  const residue: Residue = {};
  if (Object.keys(residueContent).length > 0) residue.content = residueContent;
  if (partResidue.some((entry) => entry !== null)) residue['$parts'] = partResidue;
  return { content: encoded, residue };
}

function decodeContent(content: NonNullable<ServiceEvent['content']>, partResidue: PartResidue[] | undefined, rest: Residue | undefined): unknown {
  const serviceParts = [...content.parts];
  const parts = partResidue
    ? partResidue.map((entry) => {
        if (entry !== null && 'part' in entry) return entry.part;
        const next = serviceParts.shift();
        return entry === null ? next : mergeDisjoint(next, entry.extra);
      })
    : serviceParts;
  return { ...(content.role !== undefined ? { role: content.role } : {}), ...rest, parts };
}

/** The part as the service's schema can hold it, and what is left over. */
function splitPart(part: unknown): { kept?: ServicePart; extra?: Residue } {
  if (!isObject(part)) return {};
  const kept: Record<string, unknown> = {};
  const extra: Residue = {};
  for (const [key, value] of Object.entries(part)) {
    if (value === undefined) continue;
    const split =
      key === 'text' ? (typeof value === 'string' ? { kept: value } : { extra: value })
      : key === 'thought' ? (typeof value === 'boolean' ? { kept: value } : { extra: value })
      : key === 'functionCall' ? splitNamed(value, 'args')
      : key === 'functionResponse' ? splitNamed(value, 'response')
      : key === 'inlineData' ? splitInlineData(value)
      : { extra: value };
    if (split.kept !== undefined) kept[key] = split.kept;
    if (split.extra !== undefined) extra[key] = split.extra;
  }
  if (Object.keys(kept).length === 0) return {};
  return { kept: kept as ServicePart, ...(Object.keys(extra).length > 0 ? { extra } : {}) };
}

/** A function call or response: `{ id?, name, <payload> }` to the service, its other fields (willContinue, scheduling, …) left over. */
function splitNamed(value: unknown, payload: 'args' | 'response'): { kept?: unknown; extra?: unknown } {
  if (!isObject(value) || !shortString(value.name, 256) || !isObject(value[payload]) || !(value.id === undefined || (typeof value.id === 'string' && value.id.length <= MAX_SHORT))) {
    return { extra: value };
  }
  const { id, name, [payload]: body, ...rest } = value;
  return { kept: { ...(id !== undefined ? { id } : {}), name, [payload]: body }, ...leftover(rest) };
}

function splitInlineData(value: unknown): { kept?: unknown; extra?: unknown } {
  if (!isObject(value) || !shortString(value.mimeType, 256) || typeof value.data !== 'string' || !BASE64.test(value.data)) return { extra: value };
  const { mimeType, data, ...rest } = value;
  return { kept: { mimeType, data }, ...leftover(rest) };
}

function leftover(rest: Residue): { extra?: Residue } {
  const defined = Object.fromEntries(Object.entries(rest).filter(([, value]) => value !== undefined));
  return Object.keys(defined).length > 0 ? { extra: defined } : {};
}

/** Puts a part and its left-over fields back together; they never share a leaf, so nothing is overwritten. */
function mergeDisjoint(base: unknown, extra: unknown): unknown {
  if (!isObject(base) || !isObject(extra)) return extra === undefined ? base : extra;
  const merged: Residue = { ...base };
  for (const [key, value] of Object.entries(extra)) merged[key] = mergeDisjoint(base[key], value);
  return merged;
}

function withoutTempKeys(delta: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(delta).filter(([key]) => !key.startsWith(TEMP_PREFIX)));
}
