// Queries on sessions and the per-user session counter. Every query is scoped by account and space.
import { type Expression, type InsertObject, type ExpressionBuilder, type RawBuilder, type SelectQueryBuilder, type SqlBool, type Transaction, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import { containsPattern } from '../../db/like.js';
import type { SessionKey, UserKey } from '../../db/keys.js';
import type { DB, JsonObject, SessionRow } from '../../db/schema.js';
import { sessionJson } from '../../db/session-json-sql.js';
import { NOW_MS, SESSION_NOT_EXPIRED } from '../../db/sql-fragments.js';

/** How a write sets expire_time: a fixed time, seconds from the database's now, or none. */
export type ExpirySetting = { at: Date } | { ttlSeconds: number } | null;

function expiryValue(expiry: ExpirySetting) {
  if (expiry === null) return null;
  if ('at' in expiry) return expiry.at;
  return sql<Date>`${NOW_MS} + make_interval(secs => ${expiry.ttlSeconds})`;
}

const byKey = (eb: ExpressionBuilder<DB, 'sessions'>, key: SessionKey) =>
  eb.and([
    eb('sessions.account_id', '=', key.accountId),
    eb('sessions.space_id', '=', key.spaceId),
    eb('sessions.user_id', '=', key.userId),
    eb('sessions.session_id', '=', key.sessionId),
  ]);

/** A session row with the state of its user (`user:*` keys) and of its space (`app:*` keys). */
export type SessionWithSharedState = SessionRow & { user_state: JsonObject; app_state: JsonObject };

/** Sessions joined to their user and space rows (both exist while the session does: foreign keys). */
function sessionsWithSharedState(db: Executor) {
  return db
    .selectFrom('sessions')
    .innerJoin('space_users', (join) =>
      join
        .onRef('space_users.account_id', '=', 'sessions.account_id')
        .onRef('space_users.space_id', '=', 'sessions.space_id')
        .onRef('space_users.user_id', '=', 'sessions.user_id'),
    )
    .innerJoin('session_spaces', (join) =>
      join.onRef('session_spaces.account_id', '=', 'sessions.account_id').onRef('session_spaces.space_id', '=', 'sessions.space_id'),
    )
    .selectAll('sessions')
    .select(['space_users.state as user_state', 'session_spaces.state as app_state']);
}

/** Makes the business user exist in the space (it does once it has a session). */
export async function ensureSpaceUser(trx: Transaction<DB>, key: UserKey): Promise<void> {
  await trx
    .insertInto('space_users')
    .values({ account_id: key.accountId, space_id: key.spaceId, user_id: key.userId })
    .onConflict((oc) => oc.columns(['account_id', 'space_id', 'user_id']).doNothing())
    .execute();
}

export async function adjustSessionCount(trx: Transaction<DB>, key: UserKey, delta: number): Promise<void> {
  await trx
    .updateTable('space_users')
    .set((eb) => ({ session_count: eb('session_count', '+', delta) }))
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .execute();
}

export interface NewSession {
  title: string;
  metadata: Record<string, string>;
  state: Record<string, unknown>;
  expiry: ExpirySetting;
}

/** The row of a session created through the API; the table's defaults fill the rest. */
export function newSessionValues(key: SessionKey, fields: NewSession): InsertObject<DB, 'sessions'> {
  return {
    account_id: key.accountId,
    space_id: key.spaceId,
    user_id: key.userId,
    session_id: key.sessionId,
    title: fields.title,
    metadata: JSON.stringify(fields.metadata),
    state: JSON.stringify(fields.state),
    // Where "state at event N" replays from (state-history.service.ts).
    initial_state: JSON.stringify(fields.state),
    expire_time: expiryValue(fields.expiry),
  };
}

/**
 * Inserts the session unless the key is taken (then answers undefined): create and import. A
 * concurrent insert of the same key makes this wait for the other transaction and then do nothing,
 * so exactly one caller creates the row.
 */
export type NewSessionRow = InsertObject<DB, 'sessions'>;

export async function insertSessionIfAbsent(trx: Transaction<DB>, row: NewSessionRow): Promise<SessionRow | undefined> {
  return trx
    .insertInto('sessions')
    .values(row)
    .onConflict((oc) => oc.columns(['account_id', 'space_id', 'user_id', 'session_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export type LockedSession = SessionRow & { expired: boolean };

/** The session row locked for update, expired or not (the caller decides what expiry means). */
export async function lockSession(trx: Transaction<DB>, key: SessionKey): Promise<LockedSession | undefined> {
  return trx
    .selectFrom('sessions')
    .selectAll()
    .select(sql<boolean>`coalesce(expire_time <= now(), false)`.as('expired'))
    .where((eb) => byKey(eb, key))
    .forUpdate()
    .executeTakeFirst();
}

/** The session with its user's and space's state, in one query, unless it is missing or expired. */
export async function findLiveSessionWithSharedState(db: Executor, key: SessionKey): Promise<SessionWithSharedState | undefined> {
  return liveSessionWithSharedState(db, key).executeTakeFirst();
}

/** The query of findLiveSessionWithSharedState, for readers that select more alongside (context). */
export function liveSessionWithSharedState(db: Executor, key: SessionKey) {
  return sessionsWithSharedState(db).where((eb) => eb.and([byKey(eb, key), SESSION_NOT_EXPIRED]));
}

/** Deletes the session; its events go with it (trigger sessions_delete_events). */
export async function deleteSessionRow(trx: Transaction<DB>, key: SessionKey): Promise<void> {
  await trx.deleteFrom('sessions').where((eb) => byKey(eb, key)).execute();
}

export interface SessionChanges {
  title?: string;
  metadata?: Record<string, string>;
  memo?: string | null; // serialized JSON
  expiry?: ExpirySetting;
}

/** Applies the changes, bumps the revision and the update time; answers the new row. */
export async function updateSessionRow(trx: Transaction<DB>, key: SessionKey, changes: SessionChanges): Promise<SessionRow> {
  return trx
    .updateTable('sessions')
    .set((eb) => ({
      ...(changes.title !== undefined ? { title: changes.title } : {}),
      ...(changes.metadata !== undefined ? { metadata: JSON.stringify(changes.metadata) } : {}),
      ...(changes.memo !== undefined ? { memo: changes.memo } : {}),
      ...(changes.expiry !== undefined ? { expire_time: expiryValue(changes.expiry) } : {}),
      revision: eb('revision', '+', 1),
      update_time: NOW_MS,
    }))
    .where((eb) => byKey(eb, key))
    .returningAll()
    .executeTakeFirstOrThrow();
}

export interface SessionFilter {
  accountId: string;
  spaceId: string;
  userIds?: string[];
  sessionIds?: string[];
  title?: string;
  titleLike?: string;
  /** key → accepted values: any value of one key, every key. */
  metadata?: Map<string, string[]>;
  updatedAfter?: Date;
  updatedBefore?: Date;
}

export interface SessionPageRequest {
  filter: SessionFilter;
  orderBy: 'update_time' | 'create_time';
  direction: 'asc' | 'desc';
  /** One user's list pages by (time, session_id); a space's by (time, user_id, session_id). */
  scope: 'user' | 'space';
  after?: { time: string; userId: string; sessionId: string };
  limit: number;
  /** Matching sessions to skip first (offset paging, the API 3.0 face's). */
  offset?: number;
  /** The most bytes of states, metadata and memo the page's rows may carry (the first row comes whatever its size). */
  maxBytes: number;
}

// The lists find their sessions in one of two places. A list ordered by update time walks
// sessions (sessions_{user,space}_by_update) and tests its filters on it. A list ordered by create
// time walks session_catalog (migrations/0018), the table of what appends never change, and tests
// its title and metadata filters on it (it has its own search indexes for that); what only
// sessions knows, the expiry and the update time, is tested as "no session row with the key says
// otherwise" (NOT EXISTS). Both rules are about the planner's estimates, measured on a space of a
// million sessions (bench/README.md): with a filter on one table and the order's index on the
// other, or with the catalog joined to sessions on the four key columns (whose selectivities it
// multiplies, as if user and session ids were independent), it expected a handful of rows and
// sorted every match of a broad metadata filter (seconds) instead of walking the order's index
// (a millisecond). The anti-join is estimated as what it is: nearly every session is live.

/** The catalog rows of sessions that hold one of the ids, for a filter by session ids (session_catalog_space_by_session_id). */
const catalogKeysOf = (db: Executor, filter: SessionFilter, sessionIds: string[]) =>
  db
    .selectFrom('session_catalog')
    .select(['session_catalog.user_id', 'session_catalog.session_id'])
    .where('session_catalog.account_id', '=', filter.accountId)
    .where('session_catalog.space_id', '=', filter.spaceId)
    .where('session_catalog.session_id', 'in', sessionIds);

type Searched = 'sessions' | 'session_catalog';

/**
 * The session's metadata under its space id, `{ "<spaceId>": { ...metadata } }`: containment (@>)
 * of one key and value in it is what the `*_metadata_in_space` GIN indexes of sessions and of
 * session_catalog serve, reading only that space's entries (migrations/0003, 0018). It must stay
 * the indexes' expression.
 */
const metadataInSpace = (table: Searched) => sql`jsonb_set('{}'::jsonb, ARRAY[${sql.ref(`${table}.space_id`)}], ${sql.ref(`${table}.metadata`)})`;

// The predicates of the partial search indexes (migrations/0015, 0018), as literals: the planner
// proves that a query may use a partial index from the query's text, and a bound parameter proves
// nothing. A metadata filter matches only metadata that holds its key; a non-empty title search
// only a title that is not empty.
const metadataNotEmpty = (table: Searched) => sql<SqlBool>`${sql.ref(`${table}.metadata`)} <> '{}'::jsonb`;
const titleNotEmpty = (table: Searched) => sql<SqlBool>`${sql.ref(`${table}.title`)} <> ''`;

/** The filters on what both tables hold (space, users, title, metadata), on `table`'s columns. */
function searchConditions(eb: ExpressionBuilder<DB, Searched>, filter: SessionFilter, table: Searched): Expression<SqlBool>[] {
  const conditions: Expression<SqlBool>[] = [eb(`${table}.account_id`, '=', filter.accountId), eb(`${table}.space_id`, '=', filter.spaceId)];
  if (filter.userIds?.length) conditions.push(eb(`${table}.user_id`, 'in', filter.userIds));
  if (filter.title !== undefined) conditions.push(eb(`${table}.title`, '=', filter.title));
  // Backslash is LIKE's default escape character.
  if (filter.titleLike !== undefined) conditions.push(eb(`${table}.title`, 'like', containsPattern(filter.titleLike)));
  // Only a session with a title can match a title that is not empty: said outright, so that the
  // partial index of titles (migrations/0015) can serve the search.
  if (filter.title || filter.titleLike) conditions.push(titleNotEmpty(table));
  for (const [key, values] of filter.metadata ?? []) {
    conditions.push(eb.or(values.map((value) => sql<SqlBool>`${metadataInSpace(table)} @> ${JSON.stringify({ [filter.spaceId]: { [key]: value } })}::jsonb`)));
  }
  if (filter.metadata?.size) conditions.push(metadataNotEmpty(table));
  return conditions;
}

/** What only sessions holds: not expired, and updated within the filter's times. */
function liveConditions(eb: ExpressionBuilder<DB, 'sessions'>, filter: SessionFilter): Expression<SqlBool>[] {
  const conditions: Expression<SqlBool>[] = [SESSION_NOT_EXPIRED];
  if (filter.updatedAfter) conditions.push(eb('sessions.update_time', '>', filter.updatedAfter));
  if (filter.updatedBefore) conditions.push(eb('sessions.update_time', '<', filter.updatedBefore));
  return conditions;
}

/** The matching sessions, found on sessions itself (the lists by update time, the counts). */
function matchingSessions(db: Executor, filter: SessionFilter) {
  return db.selectFrom('sessions').where((eb) => {
    const conditions = [...searchConditions(eb, filter, 'sessions'), ...liveConditions(eb, filter)];
    if (filter.sessionIds?.length) {
      conditions.push(sql<SqlBool>`(sessions.user_id, sessions.session_id) IN (${catalogKeysOf(db, filter, filter.sessionIds)})`);
    }
    return eb.and(conditions);
  });
}

/** The matching sessions' catalog rows (the lists by create time). */
function matchingCatalogRows(db: Executor, filter: SessionFilter) {
  return db.selectFrom('session_catalog').where((eb) => {
    const conditions = searchConditions(eb, filter, 'session_catalog');
    if (filter.sessionIds?.length) conditions.push(eb('session_catalog.session_id', 'in', filter.sessionIds));
    // Every catalog row has its session row (the trigger writes both in one transaction).
    // The account and space as constants too, so that Citus sees one shard (colocated: the same node).
    const sessionRuledOut = eb
      .selectFrom('sessions')
      .select(sql`1`.as('one'))
      .where('sessions.account_id', '=', filter.accountId)
      .where('sessions.space_id', '=', filter.spaceId)
      .whereRef('sessions.account_id', '=', 'session_catalog.account_id')
      .whereRef('sessions.space_id', '=', 'session_catalog.space_id')
      .whereRef('sessions.user_id', '=', 'session_catalog.user_id')
      .whereRef('sessions.session_id', '=', 'session_catalog.session_id')
      .where((inner) => inner.not(inner.and(liveConditions(inner, filter))));
    conditions.push(eb.not(eb.exists(sessionRuledOut)));
    return eb.and(conditions);
  });
}

/**
 * One page in keyset order, matching the sessions_{user,space}_by_update and
 * session_catalog_{user,space}_by_create indexes, each row with its user's and space's state
 * (joined: one query per page, not one per session). The page is chosen first and joined after:
 * when a metadata filter is served by its GIN index, every matching session is sorted to find the
 * page, and joining only the page's rows keeps the users' rows out of that (a hash join of the
 * whole space's users, otherwise).
 */
export function listSessionRows(db: Executor, page: SessionPageRequest): Promise<SessionListRows<SessionWithSharedState>> {
  return withSharedState<SessionWithSharedState>(db, page, sql`s.*`);
}

/** A list page's session as the API's JSON text, with the columns its next page token is made of. */
export interface SessionJsonListRow {
  user_id: string;
  session_id: string;
  update_time: Date;
  create_time: Date;
  session_json: string;
}

/**
 * listSessionRows with each session written by PostgreSQL as the API's JSON (the describe read's
 * text): the REST lists send it on unparsed. A page of large states is megabytes; parsing it, merging
 * the states and writing them out again held this process's event loop for over 100 ms a page, for
 * every tenant (bench/README.md, bench:neighbours attack 6).
 */
export function listSessionJsonRows(db: Executor, page: SessionPageRequest): Promise<SessionListRows<SessionJsonListRow>> {
  return withSharedState<SessionJsonListRow>(db, page, LISTED_SESSION_JSON);
}

/** SessionJsonListRow's columns over a sized page row (`s`), which carries its user's and space's state. */
const LISTED_SESSION_JSON = sql.raw(
  `s.user_id, s.session_id, s.update_time, s.create_time, ${sessionJson({ session: 's', userState: 's.user_state', appState: 's.app_state' })} AS session_json`,
);

export interface SessionListRows<Row> {
  rows: Row[];
  /** How many sessions the page query chose: more than `rows` means the byte budget or pageSize+1 cut the page. */
  candidates: number;
}

/** The columns a page is ordered by: one user's list pages by (time, session_id); a space's by (time, user_id, session_id). */
const orderKeys = (page: SessionPageRequest): string[] => (page.scope === 'user' ? [page.orderBy, 'session_id'] : [page.orderBy, 'user_id', 'session_id']);

/** The page's sessions, chosen on their keys: a sessions query that withSharedState sizes and joins. */
function chosenSessions(db: Executor, page: SessionPageRequest): SelectQueryBuilder<DB, 'sessions', SessionRow> {
  const table = page.orderBy === 'create_time' ? 'session_catalog' : 'sessions';
  const columns = orderKeys(page).map((column) => sql.ref(`${table}.${column}`));
  let after: RawBuilder<SqlBool> | undefined;
  if (page.after) {
    const { time, userId, sessionId } = page.after;
    const values = page.scope === 'user' ? [sql`${time}::timestamptz`, sql`${sessionId}`] : [sql`${time}::timestamptz`, sql`${userId}`, sql`${sessionId}`];
    const comparison = page.direction === 'desc' ? sql.raw('<') : sql.raw('>');
    after = sql<SqlBool>`(${sql.join(columns)}) ${comparison} (${sql.join(values)})`;
  }
  /** `matching` from the cursor on, in the order's keys, one page long. */
  const onePage = <T extends Searched>(matching: SelectQueryBuilder<DB, T, object>) => {
    let seek = after ? matching.where(after) : matching;
    for (const column of columns) seek = seek.orderBy(column, page.direction);
    return seek.limit(page.limit);
  };
  // With an offset, the sessions before it are skipped on their keys alone (the columns of the
  // order's index), and only the page's rows are read whole: a skipped session's state, metadata
  // and memo are never read. test/integration/offset-paging.test.ts checks the plan. A list by
  // create time reads its keys from the catalog, and its rows from sessions likewise.
  let chosenKeys;
  if (table === 'sessions') {
    const seek = onePage(matchingSessions(db, page.filter));
    if (!page.offset) return seek.selectAll('sessions');
    chosenKeys = seek.offset(page.offset).select(['sessions.account_id', 'sessions.space_id', 'sessions.user_id', 'sessions.session_id']);
  } else {
    let seek = onePage(matchingCatalogRows(db, page.filter));
    if (page.offset) seek = seek.offset(page.offset);
    chosenKeys = seek.select(['session_catalog.account_id', 'session_catalog.space_id', 'session_catalog.user_id', 'session_catalog.session_id']);
  }
  return db
    .selectFrom(chosenKeys.as('chosen'))
    .innerJoin('sessions', (join) =>
      join
        .onRef('sessions.account_id', '=', 'chosen.account_id')
        .onRef('sessions.space_id', '=', 'chosen.space_id')
        .onRef('sessions.user_id', '=', 'chosen.user_id')
        .onRef('sessions.session_id', '=', 'chosen.session_id'),
    )
    .selectAll('sessions');
}

/**
 * A state's size as PostgreSQL holds it uncompressed (its jsonb), without writing it out as text:
 * `'{}' || state` is the state itself, read whole and decompressed, which pg_column_size then
 * measures (on a stored value it would give the compressed size). Ten times cheaper than
 * octet_length(state::text) at 1 MB (10 ms against 110 ms for 100 such states); within a few
 * bytes of the text for states of strings, larger for states of numbers (an array of digits: 4 ×),
 * smaller only for strings of escaped control characters (up to 6 ×).
 */
const stateSize = (column: string) => sql<number>`pg_column_size('{}'::jsonb || ${sql.ref(column)})`;

/**
 * The page's sessions with their user's and space's state, in the page's order, as far as
 * `maxBytes` allows: a session's states (its own, its user's, its space's), metadata and memo are
 * the bulk of its answer, and with states of up to MAX_STATE_BYTES each a page of 100 would be
 * hundreds of megabytes, built in this process's memory. The sizes are measured in the database
 * (each user's and the space's once per page) and the rows past the budget are never sent: their
 * states stay in PostgreSQL. The first session always comes, whatever its size. `candidates` is how
 * many rows the page query chose: more than come back means the budget or pageSize+1 cut the page.
 *
 * Measuring a state means reading it whole and decompressing it (a page of 100 states of 1 MB:
 * 100 MB), although a page of large states stops after a few. So each session's own state as
 * stored, a lower bound read from its header (PostgreSQL keeps a value compressed only when that
 * makes it smaller), rules out first the sessions that cannot fit whatever their states decompress
 * to: those after the stored sizes alone pass the budget. Only the others are measured (own_bytes
 * is NULL for the rest, and their users' states are not measured for them). The work is bounded by
 * the request's pageSize (a walk that stops at the budget, a recursive CTE, is refused by Citus)
 * and by the budget.
 */
async function withSharedState<Row>(db: Executor, request: SessionPageRequest, columns: RawBuilder<unknown>): Promise<SessionListRows<Row>> {
  const { accountId, spaceId } = request.filter;
  const order = (alias: string) => sql.join(orderKeys(request).map((key) => sql`${sql.ref(`${alias}.${key}`)} ${sql.raw(request.direction)}`));
  // MATERIALIZED: each size is measured once (an inlined CTE repeats an expression wherever it is
  // used), and a row's states travel through as TOAST pointers until the final select sends the
  // rows within the budget. The account and space as constants, for Citus to see one shard.
  const { rows } = await sql<Row & { candidates: string }>`
    WITH page AS MATERIALIZED (
      SELECT q.*, CASE WHEN q.stored_before <= ${request.maxBytes}
        THEN ${stateSize('q.state')} + octet_length(q.metadata::text) + coalesce(octet_length(q.memo::text), 0) END AS own_bytes
      FROM (
        SELECT p.*, sum(pg_column_size(p.state)) OVER (ORDER BY ${order('p')} ROWS UNBOUNDED PRECEDING) - pg_column_size(p.state) AS stored_before
        FROM (${chosenSessions(db, request)}) AS p
      ) AS q
    ), page_users AS MATERIALIZED (
      SELECT user_id, state, ${stateSize('state')} AS bytes FROM space_users
      WHERE account_id = ${accountId} AND space_id = ${spaceId} AND user_id IN (SELECT user_id FROM page WHERE own_bytes IS NOT NULL)
    ), page_space AS MATERIALIZED (
      SELECT state, ${stateSize('state')} AS bytes FROM session_spaces WHERE account_id = ${accountId} AND space_id = ${spaceId}
    ), sized AS (
      SELECT page.*, u.state AS user_state, a.state AS app_state,
        sum(page.own_bytes + u.bytes + a.bytes) OVER w AS bytes_through, row_number() OVER w AS position
      FROM page JOIN page_users AS u ON u.user_id = page.user_id CROSS JOIN page_space AS a
      WINDOW w AS (ORDER BY ${order('page')} ROWS UNBOUNDED PRECEDING)
    )
    SELECT ${columns}, (SELECT count(*) FROM page) AS candidates FROM sized AS s
    -- The measured sessions are the page's first ones: their positions and running sums are whole.
    WHERE (s.own_bytes IS NOT NULL AND s.bytes_through <= ${request.maxBytes}) OR s.position = 1
    ORDER BY ${order('s')}`.execute(db);
  return { rows, candidates: rows.length > 0 ? Number(rows[0]!.candidates) : 0 };
}

export async function countSessions(db: Executor, filter: SessionFilter): Promise<number> {
  const row = await matchingSessions(db, filter)
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
