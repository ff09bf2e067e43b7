// What other modules do to session rows inside their own transactions (the import replaces a
// session, the context read locks one to store its memo): service functions over this module's
// repository, so that no other module reaches the repository itself.
import type { Transaction } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { SessionKey, UserKey } from '../../db/keys.js';
import type { DB, JsonObject, SessionRow } from '../../db/schema.js';
import * as repository from './sessions.repository.js';

export type { LockedSession, NewSessionRow } from './sessions.repository.js';

/** The session unless it is missing or expired, with the user's and the space's scoped state. */
export async function findLiveSessionWithScopes(
  db: Executor,
  key: SessionKey,
): Promise<{ session: SessionRow; userState: JsonObject; appState: JsonObject } | undefined> {
  const row = await repository.liveSessionWithSharedState(db, key).executeTakeFirst();
  if (!row) return undefined;
  const { user_state, app_state, ...session } = row;
  return { session, userState: user_state, appState: app_state };
}

/** The session row locked for update, expired or not (the caller decides what expiry means). */
export function lockSession(trx: Transaction<DB>, key: SessionKey): Promise<repository.LockedSession | undefined> {
  return repository.lockSession(trx, key);
}

/** Deletes the session; its events go with it. */
export function deleteSessionRow(trx: Transaction<DB>, key: SessionKey): Promise<void> {
  return repository.deleteSessionRow(trx, key);
}

/** Creates the user's row in the space unless it exists. */
export function ensureSpaceUser(trx: Transaction<DB>, key: UserKey): Promise<void> {
  return repository.ensureSpaceUser(trx, key);
}

/** Inserts the session unless one with its key exists; answers the row inserted. */
export function insertSessionIfAbsent(trx: Transaction<DB>, row: repository.NewSessionRow): Promise<SessionRow | undefined> {
  return repository.insertSessionIfAbsent(trx, row);
}
