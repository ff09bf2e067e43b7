// Queries on session spaces. Every query is scoped by account_id.
import { type Expression, type ExpressionBuilder, type SqlBool, type Transaction, sql } from 'kysely';
import { lockUntilTransactionEnds } from '../../db/advisory-lock.js';
import type { Executor } from '../../db/connect.js';
import { containsPattern } from '../../db/like.js';
import type { DB, SpaceRow } from '../../db/schema.js';
import { NOW_MS, SESSION_NOT_EXPIRED } from '../../db/sql-fragments.js';
import type { SpaceVisibility } from '../../lib/policy.js';

/** How findSpaceRow locks the row (inside a transaction); see findSpaceOrThrow in space-lookup.ts. */
export type SpaceLock = 'share' | 'key-share' | 'update';

export async function findSpaceRow(db: Executor, accountId: string, spaceId: string, lock?: SpaceLock): Promise<SpaceRow | undefined> {
  let query = db.selectFrom('session_spaces').selectAll().where('account_id', '=', accountId).where('space_id', '=', spaceId);
  if (lock === 'share') query = query.forShare();
  // Blocks a delete (FOR UPDATE) like 'share' does, but not writers of the space's app state (FOR NO KEY UPDATE).
  if (lock === 'key-share') query = query.forKeyShare();
  if (lock === 'update') query = query.forUpdate();
  return query.executeTakeFirst();
}

export interface SpaceFilters {
  name?: string | undefined;
  nameLike?: string | undefined;
  descriptionLike?: string | undefined;
  /** Any of these values (the API 3.0 Filters, whose values OR); each list ANDs with the rest. */
  spaceIdIn?: string[] | undefined;
  nameIn?: string[] | undefined;
  nameContainsAny?: string[] | undefined;
  descriptionContainsAny?: string[] | undefined;
  /** A sub-account's view (docs/design.md §2: lists never leak); undefined for the root, which sees all. */
  visibility?: SpaceVisibility | undefined;
}

/** Position after the last space of a page, in list order (create_time, space_id). */
export interface SpaceCursor {
  createTime: Date;
  spaceId: string;
}


export async function insertSpace(
  db: Executor,
  space: { accountId: string; spaceId: string; name: string; description: string; defaultTtlSeconds: number | null },
): Promise<SpaceRow> {
  return db
    .insertInto('session_spaces')
    .values({
      account_id: space.accountId,
      space_id: space.spaceId,
      name: space.name,
      description: space.description,
      default_ttl_seconds: space.defaultTtlSeconds,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Serializes `onNameExists: reuse` creates of one name in one account until the transaction ends
 * (a hash collision only makes two names wait: the lookup that follows compares the name itself).
 */
export async function lockSpaceName(trx: Transaction<DB>, accountId: string, name: string): Promise<void> {
  await lockUntilTransactionEnds(trx, ['space-name', accountId, name]);
}

function matchesFilters(accountId: string, filters: SpaceFilters) {
  return (eb: ExpressionBuilder<DB, 'session_spaces'>) => {
    const conditions: Expression<SqlBool>[] = [eb('account_id', '=', accountId)];
    if (filters.name !== undefined) conditions.push(eb('name', '=', filters.name));
    // The trigram indexes on name and description serve these LIKEs.
    if (filters.nameLike !== undefined) conditions.push(sql<boolean>`name LIKE ${containsPattern(filters.nameLike)} ESCAPE '\\'`);
    if (filters.descriptionLike !== undefined) {
      conditions.push(sql<boolean>`description LIKE ${containsPattern(filters.descriptionLike)} ESCAPE '\\'`);
    }
    if (filters.spaceIdIn) conditions.push(eb('space_id', 'in', filters.spaceIdIn));
    if (filters.nameIn) conditions.push(eb('name', 'in', filters.nameIn));
    if (filters.nameContainsAny) conditions.push(eb.or(filters.nameContainsAny.map((part) => sql<SqlBool>`name LIKE ${containsPattern(part)} ESCAPE '\\'`)));
    if (filters.descriptionContainsAny) {
      conditions.push(eb.or(filters.descriptionContainsAny.map((part) => sql<SqlBool>`description LIKE ${containsPattern(part)} ESCAPE '\\'`)));
    }
    const visibility = filters.visibility;
    if (visibility?.kind === 'only') {
      conditions.push(visibility.spaceIds.length > 0 ? eb('space_id', 'in', visibility.spaceIds) : sql<boolean>`false`);
    } else if (visibility?.kind === 'all-except' && visibility.spaceIds.length > 0) {
      conditions.push(eb('space_id', 'not in', visibility.spaceIds));
    }
    return eb.and(conditions);
  };
}

/**
 * One page in (create_time, space_id) order, served by session_spaces_by_create_time, after a
 * cursor or an offset. The spaces before an offset are skipped on their keys alone (that index
 * holds them), so no skipped space's state is read.
 */
export async function listSpaces(db: Executor, accountId: string, filters: SpaceFilters, after: SpaceCursor | undefined, limit: number, offset = 0): Promise<SpaceRow[]> {
  let seek = db.selectFrom('session_spaces').where(matchesFilters(accountId, filters));
  if (after) {
    seek = seek.where((eb) => eb(eb.refTuple('create_time', 'space_id'), '>', eb.tuple(after.createTime, after.spaceId)));
  }
  seek = seek.orderBy('create_time').orderBy('space_id').limit(limit);
  if (!offset) return seek.selectAll().execute();
  return db
    .selectFrom('session_spaces')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('space_id', 'in', seek.offset(offset).select('space_id'))
    .orderBy('create_time')
    .orderBy('space_id')
    .execute();
}

export async function countSpaces(db: Executor, accountId: string, filters: SpaceFilters): Promise<number> {
  const row = await db
    .selectFrom('session_spaces')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where(matchesFilters(accountId, filters))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

export async function updateSpace(
  db: Executor,
  accountId: string,
  spaceId: string,
  changes: { name?: string | undefined; description?: string | undefined; defaultTtlSeconds?: number | null | undefined },
): Promise<SpaceRow | undefined> {
  return db
    .updateTable('session_spaces')
    .set({
      ...(changes.name !== undefined ? { name: changes.name } : {}),
      ...(changes.description !== undefined ? { description: changes.description } : {}),
      ...(changes.defaultTtlSeconds !== undefined ? { default_ttl_seconds: changes.defaultTtlSeconds } : {}),
      update_time: NOW_MS,
    })
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .returningAll()
    .executeTakeFirst();
}

/** Whether the space holds a session that has not expired (expired ones count as gone). */
export async function hasLiveSessions(trx: Transaction<DB>, accountId: string, spaceId: string): Promise<boolean> {
  const row = await trx
    .selectFrom('sessions')
    .select(sql`1`.as('one'))
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .where(SESSION_NOT_EXPIRED)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Removes what the sweeper has not yet removed: expired sessions (their events cascade). */
export async function deleteExpiredSessions(trx: Transaction<DB>, accountId: string, spaceId: string): Promise<void> {
  await trx
    .deleteFrom('sessions')
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .where('expire_time', '<=', sql<Date>`now()`)
    .execute();
}

export async function hasUserState(trx: Transaction<DB>, accountId: string, spaceId: string): Promise<boolean> {
  const row = await trx
    .selectFrom('space_users')
    .select(sql`1`.as('one'))
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .where(sql<boolean>`state <> '{}'::jsonb`)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

/** Deletes the space and its leftover (empty) user rows; the caller has checked that it is empty. */
export async function deleteSpaceAndUsers(trx: Transaction<DB>, accountId: string, spaceId: string): Promise<void> {
  await trx.deleteFrom('space_users').where('account_id', '=', accountId).where('space_id', '=', spaceId).execute();
  await trx.deleteFrom('session_spaces').where('account_id', '=', accountId).where('space_id', '=', spaceId).execute();
}
