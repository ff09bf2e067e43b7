// Queries of the events module. Every query is scoped by the full session key, account first.
import { type Insertable, type SelectQueryBuilder, type Transaction, sql } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB, EventRow, EventsTable, JsonObject, SessionRow } from '../../db/schema.js';
import type { SessionKey } from '../sessions/sessions.repository.js';

export type { SessionKey };

export interface EventFilters {
  afterSeq?: number;
  beforeSeq?: number;
  after?: Date;
  before?: Date;
  author?: string;
}

type Executor = Database | Transaction<DB>;

const notExpired = sql<boolean>`(sessions.expire_time IS NULL OR sessions.expire_time > now())`;

function sessionQuery(db: Executor, key: SessionKey) {
  return db
    .selectFrom('sessions')
    .selectAll('sessions')
    .where('sessions.account_id', '=', key.accountId)
    .where('sessions.space_id', '=', key.spaceId)
    .where('sessions.user_id', '=', key.userId)
    .where('sessions.session_id', '=', key.sessionId)
    .where(notExpired);
}

/**
 * Locks the (unexpired) session row until the transaction ends: concurrent appends queue here and
 * each sees the state the previous one left. `now` is read after the lock is granted, so event
 * and update times follow the order in which appends were serialized.
 */
export async function lockSessionForUpdate(trx: Transaction<DB>, key: SessionKey): Promise<(SessionRow & { now: Date }) | undefined> {
  return sessionQuery(trx, key)
    .select(sql<Date>`date_trunc('milliseconds', clock_timestamp())`.as('now'))
    .forUpdate()
    .executeTakeFirst();
}

export async function findLiveSession(db: Executor, key: SessionKey): Promise<SessionRow | undefined> {
  return sessionQuery(db, key).executeTakeFirst();
}

function eventsOf<O>(query: SelectQueryBuilder<DB, 'events', O>, key: SessionKey) {
  return query
    .where('events.account_id', '=', key.accountId)
    .where('events.space_id', '=', key.spaceId)
    .where('events.user_id', '=', key.userId)
    .where('events.session_id', '=', key.sessionId);
}

export async function findEventsByEventIds(db: Executor, key: SessionKey, eventIds: string[]): Promise<EventRow[]> {
  if (eventIds.length === 0) return [];
  return eventsOf(db.selectFrom('events').selectAll(), key).where('event_id', 'in', eventIds).execute();
}

export async function findEvent(db: Executor, key: SessionKey, eventId: string): Promise<EventRow | undefined> {
  return eventsOf(db.selectFrom('events').selectAll(), key).where('event_id', '=', eventId).executeTakeFirst();
}

export async function insertEvents(trx: Transaction<DB>, rows: Insertable<EventsTable>[]): Promise<EventRow[]> {
  if (rows.length === 0) return [];
  return trx.insertInto('events').values(rows).returningAll().execute();
}

export async function updateSessionAfterAppend(
  trx: Transaction<DB>,
  key: SessionKey,
  change: { state: JsonObject; eventCount: number; revision: number; updateTime: Date },
): Promise<SessionRow> {
  return trx
    .updateTable('sessions')
    .set({ state: JSON.stringify(change.state), event_count: change.eventCount, revision: change.revision, update_time: change.updateTime })
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

function filtered<O>(query: SelectQueryBuilder<DB, 'events', O>, key: SessionKey, filters: EventFilters) {
  let q = eventsOf(query, key);
  if (filters.afterSeq !== undefined) q = q.where('seq', '>', filters.afterSeq);
  if (filters.beforeSeq !== undefined) q = q.where('seq', '<', filters.beforeSeq);
  if (filters.after !== undefined) q = q.where('event_time', '>', filters.after);
  if (filters.before !== undefined) q = q.where('event_time', '<', filters.before);
  if (filters.author !== undefined) q = q.where('author', '=', filters.author);
  return q;
}

/** One keyset page by seq: `cursorSeq` is the last seq of the previous page. */
export async function listEvents(
  db: Executor,
  key: SessionKey,
  filters: EventFilters,
  page: { order: 'asc' | 'desc'; cursorSeq?: number; limit: number },
): Promise<EventRow[]> {
  let query = filtered(db.selectFrom('events').selectAll(), key, filters);
  if (page.cursorSeq !== undefined) query = query.where('seq', page.order === 'asc' ? '>' : '<', page.cursorSeq);
  return query.orderBy('seq', page.order).limit(page.limit).execute();
}

export async function countEvents(db: Executor, key: SessionKey, filters: EventFilters): Promise<number> {
  const row = await filtered(db.selectFrom('events'), key, filters)
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return Number(row.total);
}
