// Reading events (docs/design.md §4.6): a session's events page by page, and one event. Appending is
// append.service.ts.
import type { Database } from '../../db/connect.js';
import { AppError } from '../../errors.js';
import { type ListPage, listAnswerPieces } from '../../lib/list-answer-pieces.js';
import type { PageTokens } from '../../lib/page-token.js';
import { sessionNotFound } from '../sessions/index.js';
import { type EventView, toEventView } from './event.model.js';
import type { SessionKey } from '../../db/keys.js';
import { type EventFilters, type EventListRows, type EventPage, countEvents, findEvent, findLiveSessionId, listEventJsons, listEvents } from './events.repository.js';
import type { ListEventsQueryValue } from './events.schemas.js';


export interface ListEventsResult {
  events: EventView[];
  nextPageToken?: string;
  totalCount?: number;
}

/**
 * A page of a session's events, the API's answer as the pieces of its JSON text: each event written
 * by PostgreSQL (as the context read writes it), sent on unparsed by the REST list, the pieces left
 * unjoined for sendJsonPieces. A page of large events then costs this process its bytes, not a
 * parse and a serialization of every content.
 */
export async function listSessionEventsJson(db: Database, tokens: PageTokens, maxBytes: number, key: SessionKey, query: ListEventsQueryValue): Promise<string[]> {
  const page = await findEventsPage(db, tokens, maxBytes, key, query, 0, listEventJsons);
  return listAnswerPieces('events', page.rows.map((row) => row.json), page);
}

/** `offset`: matching events to skip before the page, in the database (the API 3.0 face's Offset). */
export async function listSessionEvents(db: Database, tokens: PageTokens, maxBytes: number, key: SessionKey, query: ListEventsQueryValue, offset = 0): Promise<ListEventsResult> {
  const { rows, ...page } = await findEventsPage(db, tokens, maxBytes, key, query, offset, listEvents);
  return { events: rows.map(toEventView), ...page };
}

/**
 * A page ends at pageSize events or before the event that would take it past `maxBytes`
 * (MAX_LIST_PAGE_BYTES; the first always comes): a page shorter than pageSize with a nextPageToken.
 */
async function findEventsPage<Row extends { seq: number }>(
  db: Database,
  tokens: PageTokens,
  maxBytes: number,
  key: SessionKey,
  query: ListEventsQueryValue,
  offset: number,
  readRows: (db: Database, key: SessionKey, filters: EventFilters, page: EventPage, maxBytes: number) => Promise<EventListRows<Row>>,
): Promise<ListPage<Row>> {
  const { pageSize, pageToken, includeTotal, ...shape } = query;
  // The token is bound to the session and to everything that shapes the result except the page size.
  const fingerprint = { accountId: key.accountId, spaceId: key.spaceId, userId: key.userId, sessionId: key.sessionId, ...shape };
  const cursorSeq = pageToken === undefined ? undefined : tokens.decode(pageToken, fingerprint, ['seq'])[0];
  await requireLiveSession(db, key);

  const filters: EventFilters = {
    afterSeq: query.afterSeq,
    beforeSeq: query.beforeSeq,
    after: query.after === undefined ? undefined : new Date(query.after),
    before: query.before === undefined ? undefined : new Date(query.before),
    author: query.author,
  };
  const { rows, cutByBudget } = await readRows(db, key, filters, { order: query.order, cursorSeq, limit: pageSize + 1, offset }, maxBytes);
  const page = rows.slice(0, pageSize);
  const last = page.at(-1);
  const result: ListPage<Row> = { rows: page };
  // More follow past pageSize, or past the budget.
  if ((rows.length > pageSize || cutByBudget) && last) result.nextPageToken = tokens.encode(fingerprint, [last.seq]);
  if (includeTotal) result.totalCount = await countEvents(db, key, filters);
  return result;
}

export async function getSessionEvent(db: Database, key: SessionKey, eventId: string): Promise<EventView> {
  await requireLiveSession(db, key);
  const row = await findEvent(db, key, eventId);
  if (!row) throw new AppError('ResourceNotFound.Event', `Event ${eventId} was not found in session ${key.sessionId}.`);
  return toEventView(row);
}

/** A missing or expired session is a 404; so is the session of an unknown (or another account's) space. */
async function requireLiveSession(db: Database, key: SessionKey): Promise<void> {
  if (await findLiveSessionId(db, key)) return;
  throw await sessionNotFound(db, key);
}
