// Queries of the shared states: the user's row (space_users.state) and the space's row
// (session_spaces.state).
import type { Transaction } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB, JsonObject } from '../../db/schema.js';
import type { UserKey } from '../../db/keys.js';

/** The user's state (`{}` when the user has no row yet) and the space's state, in one query. */
export async function readSharedStates(db: Executor, user: UserKey): Promise<{ user: JsonObject; app: JsonObject } | undefined> {
  const row = await db
    .selectFrom('session_spaces')
    .leftJoin('space_users', (join) =>
      join
        .onRef('space_users.account_id', '=', 'session_spaces.account_id')
        .onRef('space_users.space_id', '=', 'session_spaces.space_id')
        .on('space_users.user_id', '=', user.userId),
    )
    .select(['space_users.state as user_state', 'session_spaces.state as app_state'])
    .where('session_spaces.account_id', '=', user.accountId)
    .where('session_spaces.space_id', '=', user.spaceId)
    .executeTakeFirst();
  return row ? { user: row.user_state ?? {}, app: row.app_state } : undefined;
}

/*
 * Shared-state writers lock FOR NO KEY UPDATE: exclusive among writers (no lost update), yet
 * compatible with the FOR KEY SHARE locks that foreign-key checks (a new session of the user, a new
 * user of the space) and session creates (the space row) take, so those never queue behind an append.
 */

/** The user's state, locked until the transaction ends. The row exists while the user has a session. */
export async function lockUserState(trx: Transaction<DB>, user: UserKey): Promise<JsonObject> {
  const row = await trx
    .selectFrom('space_users')
    .select('state')
    .where('account_id', '=', user.accountId)
    .where('space_id', '=', user.spaceId)
    .where('user_id', '=', user.userId)
    .forNoKeyUpdate()
    .executeTakeFirstOrThrow();
  return row.state;
}

/** The space's state, locked until the transaction ends. */
export async function lockSpaceState(trx: Transaction<DB>, accountId: string, spaceId: string): Promise<JsonObject> {
  const row = await trx
    .selectFrom('session_spaces')
    .select('state')
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .forNoKeyUpdate()
    .executeTakeFirstOrThrow();
  return row.state;
}

export async function saveUserState(trx: Transaction<DB>, user: UserKey, state: JsonObject): Promise<void> {
  await trx
    .updateTable('space_users')
    .set({ state: JSON.stringify(state) })
    .where('account_id', '=', user.accountId)
    .where('space_id', '=', user.spaceId)
    .where('user_id', '=', user.userId)
    .execute();
}

export async function saveSpaceState(trx: Transaction<DB>, accountId: string, spaceId: string, state: JsonObject): Promise<void> {
  await trx.updateTable('session_spaces').set({ state: JSON.stringify(state) }).where('account_id', '=', accountId).where('space_id', '=', spaceId).execute();
}

