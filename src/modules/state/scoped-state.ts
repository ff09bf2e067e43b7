// Key scopes of state (docs/design.md §4.3, the ADK convention). A top-level key `user:x` belongs to the
// user's state (shared by the user's sessions in a space), `app:x` to the space's state (shared by
// every user), `temp:x` is never stored, anything else to the session. Keys keep their prefix where
// they are stored, so the merged view a session read shows is a plain union. Pure: no I/O, inputs
// are never mutated.
import type { JsonObject } from '../../db/schema.js';
import { everyTopLevelKey, joinJsonObjects } from '../../lib/json-object-text.js';
import { parseJson } from '../../lib/parse-json.js';
import { type StateDeltaMode, applyStateDelta } from './state-delta.js';

export const STORED_SCOPES = ['session', 'user', 'app'] as const;
export type StoredScope = (typeof STORED_SCOPES)[number];
export type KeyScope = StoredScope | 'temp';

export const USER_PREFIX = 'user:';
export const APP_PREFIX = 'app:';
export const TEMP_PREFIX = 'temp:';

/** One state object per stored scope. */
export type ScopedStates = Record<StoredScope, JsonObject>;

export function scopeOfKey(key: string): KeyScope {
  if (key.startsWith(USER_PREFIX)) return 'user';
  if (key.startsWith(APP_PREFIX)) return 'app';
  if (key.startsWith(TEMP_PREFIX)) return 'temp';
  return 'session';
}

/** Whether some top-level key is of `scope`. */
function someKeyOf(object: JsonObject, scope: KeyScope): boolean {
  for (const key in object) if (scopeOfKey(key) === scope) return true;
  return false;
}

/** Whether every top-level key is of `scope`. */
function allKeysOf(object: JsonObject, scope: KeyScope): boolean {
  for (const key in object) if (scopeOfKey(key) !== scope) return false;
  return true;
}

/**
 * Splits a state or a delta by the scope of its top-level keys; `temp:` keys are dropped. The usual
 * object, all of whose keys are the session's, is its own session part (not copied: a wide delta
 * or state is walked once instead of rebuilt).
 */
export function splitByScope(object: JsonObject): ScopedStates {
  if (allKeysOf(object, 'session')) return { session: object, user: {}, app: {} };
  const parts: ScopedStates = { session: {}, user: {}, app: {} };
  for (const [key, value] of Object.entries(object)) {
    const scope = scopeOfKey(key);
    if (scope !== 'temp') parts[scope][key] = value;
  }
  return parts;
}

/** The object without its `temp:` keys (what is stored of an event's stateDelta). */
export function withoutTempKeys(object: JsonObject): JsonObject {
  if (!someKeyOf(object, 'temp')) return object;
  return Object.fromEntries(Object.entries(object).filter(([key]) => scopeOfKey(key) !== 'temp'));
}

/** The stored scopes a delta changes (`temp:` keys change nothing). */
export function scopesTouched(delta: JsonObject): Set<StoredScope> {
  const touched = new Set<StoredScope>();
  for (const key of Object.keys(delta)) {
    const scope = scopeOfKey(key);
    if (scope !== 'temp') touched.add(scope);
  }
  return touched;
}

/**
 * Applies a delta scope by scope, each part with the same mode (so `null` in merge-patch deletes
 * a scoped key, and replace stores it). A scope the delta does not touch is returned as it was.
 */
export function applyScopedDelta(states: ScopedStates, delta: JsonObject, mode?: StateDeltaMode): ScopedStates {
  const parts = splitByScope(delta);
  const next = { ...states };
  for (const scope of STORED_SCOPES) {
    if (Object.keys(parts[scope]).length > 0) next[scope] = applyStateDelta(states[scope], parts[scope], mode);
  }
  return next;
}

/**
 * The state a session read shows: the session's own keys plus the user's `user:*` and the space's
 * `app:*` keys. Each part only contributes keys of its own scope, so a stray key stored in the
 * wrong place can neither shadow nor leak into another scope.
 */
export function mergedStateView(states: ScopedStates): JsonObject {
  // The usual session: no shared keys, no stray key among its own. Its state is the view as it is.
  if (isEmpty(states.user) && isEmpty(states.app) && allKeysOf(states.session, 'session')) return states.session;
  const view: JsonObject = {};
  for (const scope of STORED_SCOPES) {
    for (const [key, value] of Object.entries(states[scope])) {
      if (scopeOfKey(key) === scope) view[key] = value;
    }
  }
  return view;
}

/**
 * mergedStateView over states given as JSON text (PostgreSQL's), as JSON text. The usual session —
 * no `user:` or `app:` state, and no key of another scope anywhere in its own text — is its own
 * view: passed on as it is. When every part holds only keys of its own scope, as the service
 * stores them, the view is their members one after the other, joined as text: a space's state of
 * a megabyte is neither parsed nor written out again by every append of its sessions. Anything
 * else (a key stored in the wrong scope by a direct write) is merged as objects.
 */
export function mergedStateText(session: string, user: string, app: string): string {
  const mayHoldStrayKeys = session.includes(`"${USER_PREFIX}`) || session.includes(`"${APP_PREFIX}`) || session.includes(`"${TEMP_PREFIX}`);
  if (user === '{}' && app === '{}' && !mayHoldStrayKeys) return session;
  const eachPartInItsScope =
    (!mayHoldStrayKeys || everyTopLevelKey(session, (key) => scopeOfKey(key) === 'session')) &&
    everyTopLevelKey(user, (key) => scopeOfKey(key) === 'user') &&
    everyTopLevelKey(app, (key) => scopeOfKey(key) === 'app');
  if (eachPartInItsScope) return joinJsonObjects([session, user, app]);
  return JSON.stringify(mergedStateView({ session: parseJson(session) as JsonObject, user: parseJson(user) as JsonObject, app: parseJson(app) as JsonObject }));
}

function isEmpty(object: JsonObject): boolean {
  for (const _key in object) return false;
  return true;
}
