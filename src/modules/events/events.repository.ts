// Queries of the events module. Every query is scoped by the full session key, account first.
import { type SelectQueryBuilder, type Transaction, sql } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB, EventRow, JsonObject, SessionRow } from '../../db/schema.js';
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

/**
 * Locks the (unexpired) session row until the transaction ends: concurrent appends queue here and
 * each sees the state the previous one left. `now` is read after the lock is granted, so event
 * and update times follow the order in which appends were serialized.
 *
 * Written as SQL text rather than with the query builder: it runs on every append, and building
 * and compiling the query cost more CPU than the rest of the statement's client side.
 */
export async function lockSessionForUpdate(trx: Transaction<DB>, key: SessionKey): Promise<(SessionRow & { now: Date }) | undefined> {
  const result = await sql<SessionRow & { now: Date }>`
    SELECT sessions.*, date_trunc('milliseconds', clock_timestamp()) AS now
    FROM sessions
    WHERE account_id = ${key.accountId} AND space_id = ${key.spaceId} AND user_id = ${key.userId} AND session_id = ${key.sessionId}
      AND (expire_time IS NULL OR expire_time > now())
    FOR UPDATE
  `.execute(trx);
  return result.rows[0];
}

/**
 * The session's id if it exists and has not expired. Only the key is read: the reads that check
 * this need nothing else, and the state, metadata and memo can be large.
 */
export async function findLiveSession(db: Executor, key: SessionKey): Promise<{ session_id: string } | undefined> {
  return db
    .selectFrom('sessions')
    .select('sessions.session_id')
    .where('sessions.account_id', '=', key.accountId)
    .where('sessions.space_id', '=', key.spaceId)
    .where('sessions.user_id', '=', key.userId)
    .where('sessions.session_id', '=', key.sessionId)
    .where(notExpired)
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

/** What an append writes: its new events (in seq order) and the session's new counters and state. */
export interface AppendWrite {
  events: EventRow[];
  /** The session's new state, already serialized (the size limit measured this very text). */
  stateJson: string;
  eventCount: number;
  revision: number;
  updateTime: Date;
}

export interface AppendWriteResult {
  /** One of the events' ids was already stored: nothing was written. */
  replayed: boolean;
  /** The user's and the space's state, read in the same statement (for the session view). */
  userState: JsonObject;
  appState: JsonObject;
}

const json = (value: unknown) => (value === null ? null : JSON.stringify(value));

/**
 * Inserts the events and updates the session in one statement, unless one of the events' ids is
 * already stored in the session: then nothing is written and `replayed` is true. The same
 * statement reads the user's and the space's state for the session view. One round trip instead
 * of four (replay lookup, shared states, insert, update): the append's cost is mostly round trips.
 *
 * Run it while holding the session row (lockSessionForUpdate): its snapshot is then taken after
 * every earlier append of the session committed, so the replay check sees their events. The rows
 * go in as one array per column (unnest), so the SQL text is the same for any batch size.
 */
export async function writeAppend(trx: Transaction<DB>, key: SessionKey, write: AppendWrite): Promise<AppendWriteResult> {
  const { accountId, spaceId, userId, sessionId } = key;
  const rows = write.events;
  const column = <T>(pick: (row: EventRow) => T) => rows.map(pick);
  const result = await sql<{ replayed: boolean; user_state: JsonObject; app_state: JsonObject }>`
    WITH existing AS (
      SELECT FROM events
      WHERE account_id = ${accountId} AND space_id = ${spaceId} AND user_id = ${userId} AND session_id = ${sessionId}
        AND event_id = ANY(${column((row) => row.event_id)}::text[])
      LIMIT 1
    ), inserted AS (
      INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, invocation_id, author, content, actions,
                          metadata, extensions, error_code, error_message, event_time, create_time, payload_hash)
      SELECT ${accountId}, ${spaceId}, ${userId}, ${sessionId}, e.*
      FROM unnest(${column((row) => row.seq)}::bigint[], ${column((row) => row.event_id)}::text[],
                  ${column((row) => row.invocation_id)}::text[], ${column((row) => row.author)}::text[],
                  ${column((row) => json(row.content))}::jsonb[], ${column((row) => json(row.actions))}::jsonb[],
                  ${column((row) => json(row.metadata))}::jsonb[], ${column((row) => json(row.extensions))}::jsonb[],
                  ${column((row) => row.error_code)}::text[], ${column((row) => row.error_message)}::text[],
                  ${column((row) => row.event_time)}::timestamptz[], ${column((row) => row.create_time)}::timestamptz[],
                  ${column((row) => row.payload_hash)}::bytea[]) AS e
      WHERE NOT EXISTS (SELECT FROM existing)
    ), updated AS (
      UPDATE sessions
      SET state = ${write.stateJson}::jsonb, event_count = ${write.eventCount}, revision = ${write.revision}, update_time = ${write.updateTime}
      WHERE account_id = ${accountId} AND space_id = ${spaceId} AND user_id = ${userId} AND session_id = ${sessionId}
        AND NOT EXISTS (SELECT FROM existing)
    )
    SELECT EXISTS (SELECT FROM existing) AS replayed, space_users.state AS user_state, session_spaces.state AS app_state
    FROM session_spaces
    JOIN space_users ON space_users.account_id = session_spaces.account_id AND space_users.space_id = session_spaces.space_id
    WHERE session_spaces.account_id = ${accountId} AND session_spaces.space_id = ${spaceId} AND space_users.user_id = ${userId}
  `.execute(trx);
  // The session row is locked, so its user and its space exist (foreign keys).
  const row = result.rows[0]!;
  return { replayed: row.replayed, userState: row.user_state, appState: row.app_state };
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
