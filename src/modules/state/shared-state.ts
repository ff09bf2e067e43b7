// Shared state (docs/design.md §4.3): the `user:` keys live on the user's row (space_users), the `app:` keys
// on the space's row (session_spaces), shared by every session that reads them. Writers that go
// through the service (session create, import) lock and save them here; the append changes them
// inside append_events() in the database, under the same lock order (session, user, space).
import type { Transaction } from 'kysely';
import type { Limits } from '../../config.js';
import type { DB, JsonObject } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { stateBytes } from '../../lib/json-measure.js';
import { spaceNotFound } from '../spaces/index.js';
import type { UserKey } from '../../db/keys.js';
import type { ScopedStates, StoredScope } from './scoped-state.js';
import { lockSpaceState, lockUserState, readSharedStates, saveSpaceState, saveUserState } from './shared-state.repository.js';

/** The state shared by the sessions of a user (`user:` keys) and of a space (`app:` keys). */
export interface SharedStates {
  user: JsonObject;
  app: JsonObject;
}

/**
 * The user's and the space's state for a transaction that holds the session row (or has just
 * inserted it). The scopes it will write are locked, always in the order user then space, so that
 * writers touching both scopes cannot deadlock; the others are read without a lock.
 */
export async function lockSharedStates(trx: Transaction<DB>, user: UserKey, writing: ReadonlySet<StoredScope>): Promise<SharedStates> {
  const userState = writing.has('user') ? await lockUserState(trx, user) : undefined;
  const appState = writing.has('app') ? await lockSpaceState(trx, user.accountId, user.spaceId) : undefined;
  if (userState !== undefined && appState !== undefined) return { user: userState, app: appState };
  const read = await readSharedStates(trx, user);
  if (!read) throw spaceNotFound(user.spaceId);
  return { user: userState ?? read.user, app: appState ?? read.app };
}

/**
 * Writes the user's and the space's state where they changed, after checking each against the state
 * size limit (413, and the caller's transaction rolls back: nothing is written).
 */
export async function saveSharedStates(
  trx: Transaction<DB>,
  limits: Limits,
  user: UserKey,
  before: SharedStates,
  after: ScopedStates,
): Promise<Partial<Record<keyof SharedStates, number>>> {
  // Only a changed scope is measured: an unchanged one is not written.
  const userChanged = after.user !== before.user;
  const appChanged = after.app !== before.app;
  const bytes: Partial<Record<keyof SharedStates, number>> = {};
  if (userChanged) bytes.user = assertStateWithinLimit(limits, 'user', after.user);
  if (appChanged) bytes.app = assertStateWithinLimit(limits, 'app', after.app);
  if (userChanged) await saveUserState(trx, user, after.user);
  if (appChanged) await saveSpaceState(trx, user.accountId, user.spaceId, after.app);
  return bytes;
}

const SCOPE_NAMES: Record<StoredScope, string> = { session: 'session', user: "user's", app: "space's (app)" };

/**
 * 413 when one scope's state would be over the limit; the size limit applies to each scope apart,
 * and counts the state as PostgreSQL stores it (stateBytes). Returns the size it measured.
 */
export function assertStateWithinLimit(limits: Limits, scope: StoredScope, state: JsonObject): number {
  const bytes = stateBytes(state);
  if (bytes <= limits.stateBytes) return bytes;
  throw stateLimitExceeded(scope, bytes, limits.stateBytes);
}

export function stateLimitExceeded(scope: StoredScope, bytes: number, limit: number): AppError {
  return new AppError('LimitExceeded.State', `The ${SCOPE_NAMES[scope]} state would be ${bytes} bytes serialized; the limit is ${limit}. Nothing was changed.`, {
    details: { scope, stateBytes: bytes, limit },
  });
}
