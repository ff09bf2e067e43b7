// Session spaces: create, list, describe, modify, delete. Every operation is scoped to the caller's
// account; another account's space answers the same 404 as a missing one.
import type { Database } from '../../db/connect.js';
import { AppError } from '../../errors.js';
import type { PageTokens } from '../../lib/page-token.js';
import { newSpaceId } from '../../lib/ids.js';
import type { Principal } from '../../lib/principal.js';
import { visibleSpaces } from '../../lib/policy.js';
import { findSpaceOrThrow, spaceNotFound } from './space-lookup.js';
import {
  type SpaceCursor,
  type SpaceFilters,
  countSpaces,
  deleteExpiredSessions,
  deleteSpaceAndUsers,
  hasLiveSessions,
  hasUserState,
  insertSpace,
  listSpaces,
  lockSpaceName,
  updateSpace,
} from './spaces.repository.js';
import { type CreateSpaceInput, type ListSpacesInput, type ModifySpaceInput, type SpaceView, toSpaceView } from './spaces.schemas.js';

export interface CreatedSpace {
  space: SpaceView;
  /** false when `onNameExists: reuse` found a space of that name. */
  created: boolean;
}

/**
 * Creates a space; with `onNameExists: 'reuse'`, first looks for the oldest space of that name the
 * caller may describe. The reuse path runs under a transaction-scoped advisory lock on (account,
 * name), so two callers reusing one name at once cannot both miss and both insert: the second waits
 * for the first to commit and then finds its space. Plain creates take no lock: names are not unique.
 */
export async function createSpace(db: Database, principal: Principal, input: CreateSpaceInput): Promise<CreatedSpace> {
  const { accountId } = principal;
  const newSpace = { accountId, spaceId: newSpaceId(), name: input.name, description: input.description, defaultTtlSeconds: input.defaultTtlSeconds ?? null };
  if (input.onNameExists !== 'reuse') return { space: toSpaceView(await insertSpace(db, newSpace)), created: true };

  const visibility = principal.kind === 'root' ? undefined : visibleSpaces(principal.statements, 'session:DescribeSessionSpaces');
  return db.transaction().execute(async (trx) => {
    await lockSpaceName(trx, accountId, input.name);
    const [existing] = await listSpaces(trx, accountId, { name: input.name, visibility }, undefined, 1);
    if (existing) return { space: toSpaceView(existing), created: false };
    return { space: toSpaceView(await insertSpace(trx, newSpace)), created: true };
  });
}

export async function describeSpace(db: Database, accountId: string, spaceId: string): Promise<SpaceView> {
  return toSpaceView(await findSpaceOrThrow(db, accountId, spaceId));
}

export interface SpacePage {
  spaces: SpaceView[];
  nextPageToken?: string;
  totalCount?: number;
}

/**
 * Lists the spaces the caller may describe (docs/design.md §2: a sub-account sees only those), filtered in
 * SQL so that paging and totalCount count only visible spaces.
 */
export async function listSpacesPage(db: Database, tokens: PageTokens, principal: Principal, input: ListSpacesInput): Promise<SpacePage> {
  const { accountId } = principal;
  const filters = { name: input.name, nameLike: input.nameLike, descriptionLike: input.descriptionLike };
  // The resource name keeps a token of another list from being accepted here. The policy stays
  // out of the fingerprint: a token only carries a position inside the caller's account, and the
  // visibility is applied again on every page.
  const tokenQuery = { list: 'spaces', accountId, ...filters };
  const after = input.pageToken ? toCursor(tokens.decode(input.pageToken, tokenQuery, ['time', 'id'])) : undefined;
  const visibility = principal.kind === 'root' ? undefined : visibleSpaces(principal.statements, 'session:DescribeSessionSpaces');
  if (visibility?.kind === 'only' && visibility.spaceIds.length === 0) {
    return { spaces: [], ...(input.includeTotal ? { totalCount: 0 } : {}) };
  }

  const rows = await listSpaces(db, accountId, { ...filters, visibility }, after, input.pageSize + 1);
  const page = rows.slice(0, input.pageSize);
  const last = page.at(-1);
  const result: SpacePage = { spaces: page.map(toSpaceView) };
  if (rows.length > input.pageSize && last) {
    result.nextPageToken = tokens.encode(tokenQuery, [last.create_time.toISOString(), last.space_id]);
  }
  if (input.includeTotal) result.totalCount = await countSpaces(db, accountId, { ...filters, visibility });
  return result;
}

/** The API 3.0 filters of a space list: each list of values ORs, the lists AND. */
export type SpaceMatch = Pick<SpaceFilters, 'spaceIdIn' | 'nameIn' | 'nameContainsAny' | 'descriptionContainsAny'>;

/**
 * `limit` spaces from `offset` on, in list order, of those the principal may describe, with the
 * count of all of them (the API 3.0 face's Offset paging). The offset is skipped in the database.
 */
export async function listSpacesAtOffset(db: Database, principal: Principal, match: SpaceMatch, offset: number, limit: number): Promise<{ spaces: SpaceView[]; totalCount: number }> {
  const visibility = principal.kind === 'root' ? undefined : visibleSpaces(principal.statements, 'session:DescribeSessionSpaces');
  if (visibility?.kind === 'only' && visibility.spaceIds.length === 0) return { spaces: [], totalCount: 0 };
  const filters = { ...match, visibility };
  const rows = await listSpaces(db, principal.accountId, filters, undefined, limit, offset);
  return { spaces: rows.map(toSpaceView), totalCount: await countSpaces(db, principal.accountId, filters) };
}

function toCursor([createTime, spaceId]: [string, string]): SpaceCursor {
  return { createTime: new Date(createTime), spaceId };
}

export async function modifySpace(db: Database, accountId: string, spaceId: string, input: ModifySpaceInput): Promise<SpaceView> {
  const row = await updateSpace(db, accountId, spaceId, input);
  if (!row) throw spaceNotFound(spaceId);
  return toSpaceView(row);
}

/**
 * Deletes an empty space. The row lock (FOR UPDATE) waits for session creates in flight (they hold
 * it FOR SHARE) and keeps new ones out until the delete commits, so no session can land in a
 * space that is being deleted.
 */
export async function deleteSpace(db: Database, accountId: string, spaceId: string): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const space = await findSpaceOrThrow(trx, accountId, spaceId, 'update');
    if (space.is_default) {
      throw new AppError('OperationDenied.DefaultSessionSpaceProtected', `Session space ${spaceId} is the account's default space and cannot be deleted.`);
    }
    if (await hasLiveSessions(trx, accountId, spaceId)) {
      throw new AppError('ResourceInUse.SessionSpaceNotEmpty', `Session space ${spaceId} still holds sessions; delete them first.`);
    }
    // Expired sessions already behave as gone; remove them here rather than wait for the sweeper.
    // A later 409 rolls this back.
    await deleteExpiredSessions(trx, accountId, spaceId);
    if (Object.keys(space.state).length > 0 || (await hasUserState(trx, accountId, spaceId))) {
      throw new AppError('ResourceInUse.SessionSpaceNotEmpty', `Session space ${spaceId} still holds user or space state.`);
    }
    await deleteSpaceAndUsers(trx, accountId, spaceId);
  });
}
