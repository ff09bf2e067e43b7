// The business users of a space: who has sessions or user state there, and when they were last active.
import type { Database } from '../../db/connect.js';
import { AppError } from '../../errors.js';
import { decodePageToken, encodePageToken } from '../../http/page-token.js';
import { findSpaceOrThrow } from '../spaces/space-lookup.js';
import { countSpaceUsers, listSpaceUsers } from './users.repository.js';
import type { ListSpaceUsersInput, SpaceUserView } from './users.schemas.js';

export interface SpaceUserPage {
  users: SpaceUserView[];
  nextPageToken?: string;
  totalCount?: number;
}

export async function listSpaceUsersPage(db: Database, accountId: string, spaceId: string, input: ListSpaceUsersInput): Promise<SpaceUserPage> {
  await findSpaceOrThrow(db, accountId, spaceId);
  // The space is part of the query: a token from one space's list is refused by another's.
  const tokenQuery = { list: 'space-users', spaceId };
  const afterUserId = input.pageToken ? toUserCursor(decodePageToken(input.pageToken, tokenQuery)) : undefined;

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
  if (rows.length > input.pageSize && last) result.nextPageToken = encodePageToken(tokenQuery, [last.user_id]);
  if (input.includeTotal) result.totalCount = await countSpaceUsers(db, accountId, spaceId);
  return result;
}

function toUserCursor(position: (string | number)[]): string {
  const [userId] = position;
  if (position.length !== 1 || typeof userId !== 'string') {
    throw new AppError('InvalidParameter.PageToken', 'pageToken is invalid: it is not a token of this list.', {
      details: { issues: [{ field: 'pageToken', message: 'it is not a token of this list' }] },
    });
  }
  return userId;
}
