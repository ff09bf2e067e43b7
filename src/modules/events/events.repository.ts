// Queries of the events module. Every query is scoped by the full session key, account first.
import { CompiledQuery, type SelectQueryBuilder, type Transaction, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB, EventRow, SessionRow } from '../../db/schema.js';
import { eventJson } from '../../db/event-json-sql.js';
import { preparedStatement } from '../../db/prepared-statements.js';
import { sessionKeyParameters } from '../../db/session-json-sql.js';
import { EVENTS_OF_SESSION_KEY, SESSION_NOT_EXPIRED, sessionNotExpiredText } from '../../db/sql-fragments.js';
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

/** A page's rows within its byte budget, and whether the budget ended it before the next event. */
export interface EventListRows<Row> {
  rows: Row[];
  cutByBudget: boolean;
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
  return pageOfEvents(db, key, filters, page, maxBytes, 'events.*');
}

/** An event of a list page as the API's JSON text, written by PostgreSQL (toEventView in SQL). */
export interface EventJsonListRow {
  seq: number;
  json: string;
}

const LISTED_EVENT_JSON = `events.seq, ${eventJson({ event: 'events', contentText: 'events.content::text' })} AS json`;

const SIZED_COLUMNS = ['content', 'actions', 'metadata', 'extensions'];

/**
 * What an event weighs in a page: its jsonb columns' size as PostgreSQL holds them uncompressed, and
 * its error message; within a few bytes of its JSON for text, and measured without writing it. A
 * compressed value is measured decompressed (`'{}' || x` detoasts it, as the session lists measure
 * states, sessions.repository.ts); any other is its stored size, read from its header.
 */
const eventSize = (row: string) => `${SIZED_COLUMNS.map(
  (column) => `coalesce(CASE WHEN pg_column_compression(${row}.${column}) IS NULL THEN pg_column_size(${row}.${column}) ELSE pg_column_size('{}'::jsonb || ${row}.${column}) END, 0)`,
).join(' + ')} + coalesce(octet_length(${row}.error_message), 0)`;

/**
 * What an event takes as stored, read from the values' headers without decompressing anything: never
 * more than eventSize (PostgreSQL keeps a value compressed only when that makes it smaller).
 */
const STORED_SIZE = `${SIZED_COLUMNS.map((column) => `coalesce(pg_column_size(events.${column}), 0)`).join(' + ')} + coalesce(octet_length(events.error_message), 0)`;

type Direction = 'ASC' | 'DESC';

/**
 * The rows of `chosen` (events with their `stored_bytes`, in seq order), each as `columns` over
 * `events`, up to `maxBytes` (a parameter) of events: a page of 200 events of 256 KiB would be 50 MB
 * in this process's memory and held its event loop for every tenant while it was written. The sizes
 * are measured in the database and the rows past the budget are never written out; the first event
 * always comes, whatever its size. `next_passes` tells whether the event after a row would pass.
 *
 * Measuring an event compressed as stored means decompressing it (115 ms for 200 events of 250 KB),
 * so the stored sizes, a lower bound read from the headers, rule out first the events that cannot
 * fit whatever they decompress to (those after the stored sizes alone pass the budget); only the
 * others are measured (own_bytes is NULL for the rest). Each level keeps the page's order (no sort)
 * and stays a subquery of its own (PostgreSQL does not pull up a window), so each size is measured
 * once.
 */
const withinBudget = (chosen: string, maxBytes: string, columns: string, direction: Direction) => `SELECT ${columns}, events.next_passes FROM (
  SELECT q.*, sum(q.own_bytes) OVER w AS bytes_through, row_number() OVER w AS position,
    CASE WHEN lead(q.own_bytes) OVER w IS NULL THEN q.followed ELSE sum(q.own_bytes) OVER w + lead(q.own_bytes) OVER w > ${maxBytes} END AS next_passes
  FROM (
    SELECT p.*, lead(p.seq) OVER v IS NOT NULL AS followed,
      CASE WHEN sum(p.stored_bytes) OVER v - p.stored_bytes <= ${maxBytes} THEN ${eventSize('p')} END AS own_bytes
    FROM (${chosen}) AS p
    WINDOW v AS (ORDER BY p.seq ${direction} ROWS UNBOUNDED PRECEDING)
  ) AS q
  WHERE q.own_bytes IS NOT NULL
  WINDOW w AS (ORDER BY q.seq ${direction} ROWS UNBOUNDED PRECEDING)
) AS events
WHERE events.bytes_through <= ${maxBytes} OR events.position = 1
ORDER BY events.seq ${direction}`;

/**
 * The REST list's common page, no filter but the seq range and no offset, as a named statement
 * (db/prepared-statements.ts) per order: planned once per connection, where the budget's window
 * doubled the planning of an unnamed one. $5 < seq < $6, $7 the limit, $8 the budget.
 *
 * Planned once for any session (EVENTS_OF_SESSION_KEY, and the bounds and the limit read as
 * subqueries): with plain parameters, every page of a short session beside a long one was planned
 * again for its values (12 of 12 pages of either order in test/integration/context-read-plan.test.ts).
 */
const rangePageStatement = (direction: Direction) =>
  preparedStatement(
    `list_events_${direction.toLowerCase()}`,
    withinBudget(
      `SELECT events.*, ${STORED_SIZE} AS stored_bytes FROM events
      WHERE ${EVENTS_OF_SESSION_KEY} AND events.seq > (SELECT $5::bigint) AND events.seq < (SELECT $6::bigint)
      ORDER BY events.seq ${direction} LIMIT (SELECT $7::integer)`,
      '$8',
      LISTED_EVENT_JSON,
      direction,
    ),
  );
const RANGE_PAGE = { asc: rangePageStatement('ASC'), desc: rangePageStatement('DESC') };

/**
 * listEvents with each event as the API's JSON text: the REST list sends it on unparsed. A page is
 * up to 200 events of up to 256 KiB each; parsing every content and writing it out again held this
 * process's event loop for every tenant.
 */
export async function listEventJsons(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage, maxBytes: number): Promise<EventListRows<EventJsonListRow>> {
  if (skipsRows(filters, page)) return pageOfEvents(db, key, filters, page, maxBytes, LISTED_EVENT_JSON);
  const cursor = page.cursorSeq;
  const after = Math.max(filters.afterSeq ?? 0, page.order === 'asc' ? (cursor ?? 0) : 0);
  const before = Math.min(filters.beforeSeq ?? Number.MAX_SAFE_INTEGER, page.order === 'desc' ? (cursor ?? Number.MAX_SAFE_INTEGER) : Number.MAX_SAFE_INTEGER);
  return runWithinBudget(db, CompiledQuery.raw(RANGE_PAGE[page.order], [...sessionKeyParameters(key), after, before, page.limit, maxBytes]));
}

/** Runs a withinBudget statement: its rows, and whether the budget cut the page (the last row's next_passes). */
async function runWithinBudget<Row>(db: Executor, statement: CompiledQuery): Promise<EventListRows<Row>> {
  const { rows } = await db.executeQuery<Row & { next_passes: boolean }>(statement);
  return { rows, cutByBudget: rows.at(-1)?.next_passes ?? false };
}

const skipsRows = (filters: EventFilters, page: EventPage) =>
  Boolean(page.offset) || filters.author !== undefined || filters.after !== undefined || filters.before !== undefined;

/** Any page, through Kysely: the chosen rows' query, then withinBudget over it. */
async function pageOfEvents<Row>(db: Executor, key: SessionKey, filters: EventFilters, page: EventPage, maxBytes: number, columns: string): Promise<EventListRows<Row>> {
  const sized = db.selectFrom('events').selectAll().select(sql<number>`${sql.raw(STORED_SIZE)}`.as('stored_bytes'));
  // The second step keeps its ORDER BY, so that it stays a subquery of its own (PostgreSQL does not
  // pull up a sorted one): each stored size is read once, in the order the windows follow.
  const chosen = skipsRows(filters, page)
    ? eventsOf(sized, key).where('seq', 'in', paged(db.selectFrom('events').select('events.seq'), key, filters, page)).orderBy('seq', page.order)
    : paged(sized, key, filters, page);
  const { sql: text, parameters } = chosen.compile();
  return runWithinBudget(db, CompiledQuery.raw(withinBudget(text, `$${parameters.length + 1}`, columns, page.order === 'asc' ? 'ASC' : 'DESC'), [...parameters, maxBytes]));
}

export async function countEvents(db: Executor, key: SessionKey, filters: EventFilters): Promise<number> {
  const row = await filtered(db.selectFrom('events'), key, filters)
    .select((eb) => eb.fn.countAll<number>().as('total'))
    .executeTakeFirstOrThrow();
  return Number(row.total);
}
