// The business users of a space: who has sessions or user state there, and when they were last active.
import type { Database } from '../../db/connect.js';
import type { PageTokens } from '../../lib/page-token.js';
import { findSpaceOrThrow } from '../spaces/index.js';
import { splitByScope } from '../state/index.js';
import { countSpaceUsers, findUserState, listSpaceUsers } from './users.repository.js';
import type { ListSpaceUsersInput, SpaceUserView, UserStateView } from './users.schemas.js';

export interface SpaceUserPage {
  users: SpaceUserView[];
  nextPageToken?: string;
  totalCount?: number;
}

export async function listSpaceUsersPage(db: Database, tokens: PageTokens, accountId: string, spaceId: string, input: ListSpaceUsersInput): Promise<SpaceUserPage> {
  await findSpaceOrThrow(db, accountId, spaceId);
  // The space is part of the query: a token from one space's list is refused by another's.
  const tokenQuery = { list: 'space-users', accountId, spaceId };
  const afterUserId = input.pageToken ? tokens.decode(input.pageToken, tokenQuery, ['id'])[0] : undefined;

  const rows = await listSpaceUsers(db, accountId, spaceId, afterUserId, input.pageSize + 1);
  const page = rows.slice(0, input.pageSize);
  const last = page.at(-1);
  const result: SpaceUserPage = {
    users: page.map((row) => ({
      userId: row.user_id,
      sessionCount: Number(row.session_count),
      lastActivityTime: row.last_activity_time ? new Date(row.last_activity_time).toISOString() : null,
    })),
  };
  if (rows.length > input.pageSize && last) result.nextPageToken = tokens.encode(tokenQuery, [last.user_id]);
  if (input.includeTotal) result.totalCount = await countSpaceUsers(db, accountId, spaceId);
  return result;
}

/**
 * The user's `user:*` keys. A user that does not exist in the space (no session, no user state)
 * answers an empty state rather than a 404: its state is `{}` until a delta writes to it, which is
 * what an agent reading it on a first turn wants.
 */
export async function describeUserState(db: Database, accountId: string, spaceId: string, userId: string): Promise<UserStateView> {
  await findSpaceOrThrow(db, accountId, spaceId);
  const state = (await findUserState(db, accountId, spaceId, userId)) ?? {};
  return { userId, state: splitByScope(state).user };
}
