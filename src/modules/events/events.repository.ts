// Queries of the events module. Every query is scoped by the full session key, account first.
import { type RawBuilder, type SelectQueryBuilder, type Transaction, sql } from 'kysely';
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

/** A page's rows within its byte budget, and how many the page query found (more: the budget or the limit cut it). */
export interface EventListRows<Row> {
  rows: Row[];
  candidates: number;
}

/**
 * One page by seq, found by a keyset cursor, an offset, or both, as far as `maxBytes` allows.
 *
 * A page that skips rows (an offset) or filters by author or time is found in two steps: the seqs
 * of the page, walked in seq order through the primary key, whose entries carry author and
 * event_time (migrations/0017), so that neither a skipped nor a filtered-out event's row is read;
 * then the page's rows by those seqs. test/integration/offset-paging.test.ts checks the plan. An
 * unfiltered page without an offset is the primary key's range itself, read at once.
 */
export function listEvents(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage, maxBytes: number): Promise<EventListRows<EventRow>> {
  return pageOfEvents(db, key, filters, page, maxBytes, sql`events.*`);
}

/** Up to `limit` events after `afterSeq`, in seq order, whatever their size (an event stream's read). */
export function listEventsAfter(db: Executor, key: SessionKey, afterSeq: number, limit: number): Promise<EventRow[]> {
  return paged(db.selectFrom('events').selectAll(), key, {}, { order: 'asc', cursorSeq: afterSeq, limit }).execute();
}

/** An event of a list page as the API's JSON text, written by PostgreSQL (toEventView in SQL). */
export interface EventJsonListRow {
  seq: number;
  json: string;
}

const LISTED_EVENT_JSON = sql`events.seq, ${sql.raw(eventJson({ event: 'events', contentText: 'events.content::text' }))} AS json`;

/**
 * listEvents with each event as the API's JSON text: the REST list sends it on unparsed. A page is
 * up to 200 events of up to 256 KiB each; parsing every content and writing it out again held this
 * process's event loop for every tenant.
 */
export function listEventJsons(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage, maxBytes: number): Promise<EventListRows<EventJsonListRow>> {
  return pageOfEvents(db, key, filters, page, maxBytes, LISTED_EVENT_JSON);
}

/**
 * What an event weighs in a page: its jsonb columns as PostgreSQL holds them uncompressed (as the
 * session lists measure states, sessions.repository.ts: `'{}' || x` detoasts x, pg_column_size then
 * measures it) and its error message. Within a few bytes of its JSON for text, without writing it.
 */
const eventSize = (alias: string) => {
  const jsonbSize = (column: string) => `coalesce(pg_column_size('{}'::jsonb || ${alias}.${column}), 0)`;
  return sql.raw(`${['content', 'actions', 'metadata', 'extensions'].map(jsonbSize).join(' + ')} + coalesce(octet_length(${alias}.error_message), 0)`);
};

/**
 * The page's rows, each as `columns` (over `events`), in seq order, up to `maxBytes` of events: a
 * page of 200 events of 256 KiB would be 50 MB in this process's memory and held its event loop for
 * every tenant while it was written. The sizes are measured in the database and the rows past the
 * budget are never written out; the first event always comes, whatever its size. Every candidate is
 * measured (up to the page's limit), as the session lists do.
 */
async function pageOfEvents<Row>(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage, maxBytes: number, columns: RawBuilder<unknown>): Promise<EventListRows<Row>> {
  const skipsRows = Boolean(page.offset) || filters.author !== undefined || filters.after !== undefined || filters.before !== undefined;
  const chosen = skipsRows
    ? eventsOf(db.selectFrom('events').selectAll(), key).where('seq', 'in', paged(db.selectFrom('events').select('events.seq'), key, filters, page))
    : paged(db.selectFrom('events').selectAll(), key, filters, page);
  const direction = sql.raw(page.order === 'asc' ? 'ASC' : 'DESC');
  // MATERIALIZED: each size is measured once, and the contents travel through as TOAST pointers
  // until the final select writes the rows within the budget.
  const { rows } = await sql<Row & { candidates: string }>`
    WITH page AS MATERIALIZED (
      SELECT p.*, ${eventSize('p')} AS own_bytes FROM (${chosen}) AS p
    ), sized AS (
      SELECT page.*, sum(page.own_bytes) OVER w AS bytes_through, row_number() OVER w AS position
      FROM page WINDOW w AS (ORDER BY page.seq ${direction} ROWS UNBOUNDED PRECEDING)
    )
    SELECT ${columns}, (SELECT count(*) FROM page) AS candidates FROM sized AS events
    WHERE events.bytes_through <= ${maxBytes} OR events.position = 1
    ORDER BY events.seq ${direction}`.execute(db);
  return { rows, candidates: rows.length > 0 ? Number(rows[0]!.candidates) : 0 };
}

export async function countEvents(db: Executor, key: SessionKey, filters: EventFilters): Promise<number> {
  const row = await filtered(db.selectFrom('events'), key, filters)
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return Number(row.total);
}
