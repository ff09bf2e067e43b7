// Queries on the business users of a space (space_users), scoped by account and space.
import { type ExpressionBuilder, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB, JsonObject } from '../../db/schema.js';
import { SESSION_NOT_EXPIRED } from '../../db/sql-fragments.js';

export interface SpaceUserRow {
  user_id: string;
  session_count: number;
  last_activity_time: Date | null;
}

/** A user "exists" in a space while it has a session or user-scoped state. */
function isPresentUser(accountId: string, spaceId: string) {
  return (eb: ExpressionBuilder<DB, 'space_users'>) =>
    eb.and([
      eb('space_users.account_id', '=', accountId),
      eb('space_users.space_id', '=', spaceId),
      eb.or([eb('space_users.session_count', '>', 0), sql<boolean>`space_users.state <> '{}'::jsonb`]),
    ]);
}

/**
 * One page of users in user_id order (primary key). The last activity of each user is one backward
 * step on sessions_user_by_update per row, not an aggregate over all the space's sessions; expired
 * sessions are skipped because they behave as not found.
 */
export async function listSpaceUsers(db: Executor, accountId: string, spaceId: string, afterUserId: string | undefined, limit: number): Promise<SpaceUserRow[]> {
  let query = db
    .selectFrom('space_users')
    .select((eb) => [
      'space_users.user_id',
      'space_users.session_count',
      eb
        .selectFrom('sessions')
        .select('sessions.update_time')
        .whereRef('sessions.account_id', '=', 'space_users.account_id')
        .whereRef('sessions.space_id', '=', 'space_users.space_id')
        .whereRef('sessions.user_id', '=', 'space_users.user_id')
        .where(SESSION_NOT_EXPIRED)
        .orderBy('sessions.update_time', 'desc')
        .limit(1)
        .as('last_activity_time'),
    ])
    .where(isPresentUser(accountId, spaceId));
  if (afterUserId !== undefined) query = query.where('space_users.user_id', '>', afterUserId);
  return query.orderBy('space_users.user_id').limit(limit).execute();
}

/** The user's state in the space; undefined when the user has no row there. */
export async function findUserState(db: Executor, accountId: string, spaceId: string, userId: string): Promise<JsonObject | undefined> {
  const row = await db
    .selectFrom('space_users')
    .select('state')
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row?.state;
}

export async function countSpaceUsers(db: Executor, accountId: string, spaceId: string): Promise<number> {
  const row = await db
    .selectFrom('space_users')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where(isPresentUser(accountId, spaceId))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
