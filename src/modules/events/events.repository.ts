// Queries of the events module. Every query is scoped by the full session key, account first.
import { type SelectQueryBuilder, type Transaction, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB, EventRow, SessionRow } from '../../db/schema.js';
import { eventJson } from '../../db/event-json-sql.js';
import { SESSION_NOT_EXPIRED, sessionNotExpiredText } from '../../db/sql-fragments.js';
import type { SessionKey } from '../../db/keys.js';

export interface EventFilters {
  afterSeq?: number;
  beforeSeq?: number;
  after?: Date;
  before?: Date;
  author?: string;
}

const LIVE = sql.raw(sessionNotExpiredText('sessions'));

/**
 * Locks the (unexpired) session row until the transaction ends: the append's locked path (a retry,
 * see append.service.ts) takes it before looking up the stored events, so the lookup sees every
 * earlier append of the session. append_events() in the same transaction then updates the row it
 * already holds.
 */
export async function lockSessionForUpdate(trx: Transaction<DB>, key: SessionKey): Promise<SessionRow | undefined> {
  const result = await sql<SessionRow>`
    SELECT sessions.*
    FROM sessions
    WHERE account_id = ${key.accountId} AND space_id = ${key.spaceId} AND user_id = ${key.userId} AND session_id = ${key.sessionId}
      AND ${LIVE}
    FOR UPDATE
  `.execute(trx);
  return result.rows[0];
}

/**
 * The session's id if it exists and has not expired. Only the key is read: the reads that check
 * this need nothing else, and the state, metadata and memo can be large.
 */
export async function findLiveSessionId(db: Executor, key: SessionKey): Promise<{ session_id: string } | undefined> {
  return db
    .selectFrom('sessions')
    .select('sessions.session_id')
    .where('sessions.account_id', '=', key.accountId)
    .where('sessions.space_id', '=', key.spaceId)
    .where('sessions.user_id', '=', key.userId)
    .where('sessions.session_id', '=', key.sessionId)
    .where(SESSION_NOT_EXPIRED)
    .executeTakeFirst();
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

/** The event with this seq (the primary key). */
export async function findEventBySeq(db: Executor, key: SessionKey, seq: number): Promise<EventRow | undefined> {
  return eventsOf(db.selectFrom('events').selectAll(), key).where('seq', '=', seq).executeTakeFirst();
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

export interface EventPage {
  order: 'asc' | 'desc';
  /** The last seq of the previous page (keyset paging). */
  cursorSeq?: number;
  limit: number;
  /** Matching events to skip first (offset paging, the API 3.0 face's). */
  offset?: number;
}

function paged<O>(query: SelectQueryBuilder<DB, 'events', O>, key: SessionKey, filters: EventFilters, page: EventPage) {
  let q = filtered(query, key, filters);
  if (page.cursorSeq !== undefined) q = q.where('seq', page.order === 'asc' ? '>' : '<', page.cursorSeq);
  q = q.orderBy('seq', page.order).limit(page.limit);
  return page.offset ? q.offset(page.offset) : q;
}

/**
 * One page by seq, found by a keyset cursor, an offset, or both.
 *
 * A page that skips rows (an offset) or filters by author or time is found in two steps: the seqs
 * of the page, walked in seq order through the primary key, whose entries carry author and
 * event_time (migrations/0017), so that neither a skipped nor a filtered-out event's row is read;
 * then the page's rows by those seqs. test/integration/offset-paging.test.ts checks the plan. An
 * unfiltered page without an offset is the primary key's range itself, read at once.
 */
export function listEvents(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage): Promise<EventRow[]> {
  return pageOfEvents(db, key, filters, page, (events) => events.selectAll());
}

/** An event of a list page as the API's JSON text, written by PostgreSQL (toEventView in SQL). */
export interface EventJsonListRow {
  seq: number;
  json: string;
}

const LISTED_EVENT_JSON = sql<string>`${sql.raw(eventJson({ event: 'events', contentText: 'events.content::text' }))}`;

/**
 * listEvents with each event as the API's JSON text: the REST list sends it on unparsed. A page is
 * up to 200 events of up to 256 KiB each; parsing every content and writing it out again held this
 * process's event loop for every tenant.
 */
export function listEventJsons(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage): Promise<EventJsonListRow[]> {
  return pageOfEvents(db, key, filters, page, (events) => events.select(['events.seq', LISTED_EVENT_JSON.as('json')]));
}

async function pageOfEvents<Row>(
  db: Executor,
  key: SessionKey,
  filters: EventFilters,
  page: EventPage,
  columns: (events: SelectQueryBuilder<DB, 'events', object>) => SelectQueryBuilder<DB, 'events', Row>,
): Promise<Row[]> {
  const skipsRows = Boolean(page.offset) || filters.author !== undefined || filters.after !== undefined || filters.before !== undefined;
  if (!skipsRows) return paged(columns(db.selectFrom('events')), key, filters, page).execute();
  const seqs = paged(db.selectFrom('events').select('events.seq'), key, filters, page);
  return eventsOf(columns(db.selectFrom('events')), key).where('seq', 'in', seqs).orderBy('seq', page.order).execute();
}

export async function countEvents(db: Executor, key: SessionKey, filters: EventFilters): Promise<number> {
  const row = await filtered(db.selectFrom('events'), key, filters)
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return Number(row.total);
}
