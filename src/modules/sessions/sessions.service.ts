// Session rules: idempotent create, describe, modify with preconditions, delete, and the lists.
// Each write runs in one transaction; expired sessions behave as absent everywhere.
import type { Limits } from '../../config.js';
import type { Database, Executor } from '../../db/connect.js';
import type { JsonObject, SessionRow } from '../../db/schema.js';
import { AppError, invalidParameter } from '../../errors.js';
import { type ListPage, listAnswerPieces } from '../../lib/list-answer-pieces.js';
import type { PageTokens } from '../../lib/page-token.js';
import { type IfMatch, assertIfMatch, etagOf } from '../../lib/preconditions.js';
import { newSessionId } from '../../lib/ids.js';
import { findSpaceOrThrow } from '../spaces/index.js';
import {
  assertStateWithinLimit,
  lockSharedStates,
  saveSharedStates,
  applyMergePatch,
  applyScopedDelta,
  scopesTouched,
  splitByScope,
} from '../state/index.js';
import { type Metadata, metadataIssues } from './metadata-rules.js';
import type { SessionKey, UserKey } from '../../db/keys.js';
import { sessionNotFound } from './session-not-found.js';
import { findSessionJson } from './session-json.repository.js';
import { type SessionView, toSessionView } from './session.model.js';
import type { CreateSessionInput, ListSessionsQuery, ModifySessionInput } from './sessions.schemas.js';
import {
  type ExpirySetting,
  type SessionFilter,
  type SessionListRows,
  type SessionPageRequest,
  adjustSessionCount,
  countSessions,
  deleteSessionRow,
  ensureSpaceUser,
  findLiveSessionWithSharedState,
  insertSessionIfAbsent,
  newSessionValues,
  listSessionJsonRows,
  listSessionRows,
  lockSession,
  updateSessionRow,
} from './sessions.repository.js';

export const MEMO_MAX_BYTES = 64 * 1024;

export interface CreatedSession {
  session: SessionView;
  created: boolean;
}

/**
 * Creates the session, or answers the existing one unchanged (docs/design.md §4.1). An expired session with
 * the same id counts as absent: it is replaced. `ifNoneMatch` turns "exists" into 412.
 */
export async function createSession(
  db: Database,
  limits: Limits,
  user: UserKey,
  input: CreateSessionInput,
  ifNoneMatch: boolean,
): Promise<CreatedSession> {
  const metadata = input.metadata ?? {};
  assertValidMetadata(metadata, {});
  // `user:` and `app:` keys of the initial state go to the user's and the space's state (each set
  // whole, as a replace-mode delta would); `temp:` keys are dropped.
  const initial = splitByScope((input.state ?? {}) as JsonObject);
  const state = initial.session;
  assertStateWithinLimit(limits, 'session', state);
  const sharedInitial = { ...initial.user, ...initial.app };
  const requestedExpiry = expiryFrom(input.expireTime, input.ttlSeconds);
  const key: SessionKey = { ...user, sessionId: input.sessionId ?? newSessionId() };

  return db.transaction().execute(async (trx) => {
    // FOR KEY SHARE keeps a space delete out without queueing behind appends that write app state.
    const space = await findSpaceOrThrow(trx, user.accountId, user.spaceId, 'key-share');
    const expiry = requestedExpiry ?? (space.default_ttl_seconds ? { ttlSeconds: space.default_ttl_seconds } : null);
    const fields = { title: input.title ?? '', metadata, state, expiry };
    await ensureSpaceUser(trx, user);
    // The new session row is ours; the shared states are locked after it (user, then space), the
    // same order appends take, and applied only when this call creates the session.
    const created = async (row: SessionRow): Promise<CreatedSession> => {
      const before = await lockSharedStates(trx, user, scopesTouched(sharedInitial));
      const after = applyScopedDelta({ session: row.state, ...before }, sharedInitial, 'replace');
      await saveSharedStates(trx, limits, user, before, after);
      return { session: toSessionView(row, after), created: true };
    };
    // Two rounds at most: a concurrent create may replace an expired row between our insert
    // attempt and our lock, and then the second round finds the new row.
    for (let attempt = 0; attempt < 3; attempt++) {
      const inserted = await insertSessionIfAbsent(trx, newSessionValues(key, fields));
      if (inserted) {
        await adjustSessionCount(trx, user, 1);
        return created(inserted);
      }
      const existing = await lockSession(trx, key);
      if (!existing) continue;
      if (!existing.expired) {
        if (ifNoneMatch) throw alreadyExists(existing);
        const { expired: _expired, ...row } = existing;
        return { session: toSessionView(row, await lockSharedStates(trx, user, new Set())), created: false };
      }
      // Replacing an expired session keeps the user's session count as it was.
      await deleteSessionRow(trx, key);
      const fresh = await insertSessionIfAbsent(trx, newSessionValues(key, fields));
      if (fresh) return created(fresh);
    }
    throw new AppError('InternalError', 'The session could not be created; retry.');
  });
}

/**
 * The describe path (GET …/sessions/:sessionId), per turn for many agents. Its round trips:
 *   1. authentication, the credential lookup (src/http/auth.ts; an in-process cache replaces it);
 *   2. the read, ONE statement (findSessionJson): the live session joined to its user's and its
 *      space's state, written by PostgreSQL as the API's JSON, which the route sends as it is;
 *      a named statement (src/db/prepared-statements.ts), planned once per connection.
 * Authorization reads nothing for an allowed principal. Only for a missing session: one more
 * query (findSpaceOrThrow), to tell ResourceNotFound.SessionSpace from ResourceNotFound.Session.
 */
export async function describeSession(db: Database, key: SessionKey): Promise<{ json: string; revision: number }> {
  const session = await findSessionJson(db, key);
  if (!session) throw await sessionNotFound(db, key);
  return { json: session.session_json, revision: session.revision };
}

/**
 * The session as the API shows it (merged state: session keys plus the user's `user:*` and the
 * space's `app:*` keys), read in one query; undefined when it is missing or expired. Every module
 * that answers a session reads it through here. Inside a transaction, pass the transaction.
 */
export async function readSessionView(db: Executor, key: SessionKey): Promise<SessionView | undefined> {
  const row = await findLiveSessionWithSharedState(db, key);
  return row ? sessionViewOf(row) : undefined;
}

function sessionViewOf(row: SessionRow & { user_state: JsonObject; app_state: JsonObject }): SessionView {
  return toSessionView(row, { user: row.user_state, app: row.app_state });
}

/**
 * `replaceMetadata`: `input.metadata` is the whole new metadata (the API 3.0 ModifySession),
 * rather than a merge patch of it (REST PATCH); the same rules check the result either way.
 */
export async function modifySession(
  db: Database,
  key: SessionKey,
  input: ModifySessionInput,
  ifMatch: IfMatch,
  { replaceMetadata = false }: { replaceMetadata?: boolean } = {},
): Promise<SessionView> {
  const changed = Object.entries(input).filter(([, value]) => value !== undefined);
  if (changed.length === 0) throw invalidParameter('body', 'give at least one of title, metadata, memo, expireTime, ttlSeconds');
  let memo: string | null | undefined;
  if (input.memo !== undefined) {
    memo = input.memo === null ? null : JSON.stringify(input.memo);
    if (memo !== null && Buffer.byteLength(memo) > MEMO_MAX_BYTES) throw invalidParameter('memo', `must be at most ${MEMO_MAX_BYTES} bytes serialized`);
  }
  const expiry = expiryFrom(input.expireTime, input.ttlSeconds);

  return db.transaction().execute(async (trx) => {
    const current = await lockSession(trx, key);
    if (!current || current.expired) throw await sessionNotFound(trx, key);
    assertIfMatch(ifMatch, current.revision);
    let metadata: Metadata | undefined;
    if (input.metadata !== undefined) {
      metadata = replaceMetadata ? withoutRemovals(input.metadata) : (applyMergePatch(current.metadata, input.metadata) as Metadata);
      assertValidMetadata(metadata, current.metadata);
    }
    const row = await updateSessionRow(trx, key, {
      title: input.title,
      metadata,
      memo,
      ...(expiry !== undefined ? { expiry } : {}),
    });
    return toSessionView(row, await lockSharedStates(trx, key, new Set()));
  });
}

export async function deleteSession(db: Database, key: SessionKey, ifMatch: IfMatch): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const current = await lockSession(trx, key);
    if (!current || current.expired) throw await sessionNotFound(trx, key);
    assertIfMatch(ifMatch, current.revision);
    await deleteSessionRow(trx, key);
    await adjustSessionCount(trx, key, -1);
  });
}

export interface SessionPage {
  sessions: SessionView[];
  nextPageToken?: string;
  totalCount?: number;
}

/** Who lists which sessions: one user's (`userId` given) or a whole space's (admin view, optional user/session filters). */
export interface ListScope {
  accountId: string;
  spaceId: string;
  userId?: string;
}

/**
 * One page of sessions, the API's SessionList as the pieces of its JSON text: each session written
 * by PostgreSQL (the describe read's text), sent on unparsed by the REST lists. What a page of large
 * states costs this process is then its bytes, not a parse, a merge and a serialization of every
 * state; the pieces are left unjoined, for sendJsonPieces.
 */
export async function listSessionsJson(db: Database, limits: Limits, tokens: PageTokens, scope: ListScope, query: ListSessionsQuery): Promise<string[]> {
  const page = await findSessionPage(db, limits, tokens, scope, query, 0, listSessionJsonRows);
  return listAnswerPieces('sessions', page.rows.map((row) => row.session_json), page);
}

/** One page of sessions as views (the API 3.0 face, which answers them in its own model). */
export async function listSessions(
  db: Database,
  limits: Limits,
  tokens: PageTokens,
  scope: ListScope,
  query: ListSessionsQuery,
  /** Matching sessions to skip before the page, in the database (the API 3.0 face's Offset). */
  offset = 0,
): Promise<SessionPage> {
  const { rows, ...page } = await findSessionPage(db, limits, tokens, scope, query, offset, listSessionRows);
  return { sessions: rows.map(sessionViewOf), ...page };
}

/** The keys of a listed session that its next page token is made of. */
type ListedSessionKeys = Pick<SessionRow, 'user_id' | 'session_id' | 'update_time' | 'create_time'>;

async function findSessionPage<Row extends ListedSessionKeys>(
  db: Database,
  limits: Limits,
  tokens: PageTokens,
  scope: ListScope,
  query: ListSessionsQuery,
  offset: number,
  readRows: (db: Database, page: SessionPageRequest) => Promise<SessionListRows<Row>>,
): Promise<ListPage<Row>> {
  const filter = filterFrom(limits, scope, query);
  const orderBy = query.orderBy === 'createTime' ? 'create_time' : 'update_time';
  // The token is bound to everything that shapes the result, including the path it was issued for.
  const fingerprint = {
    accountId: scope.accountId,
    spaceId: scope.spaceId,
    scopeUserId: scope.userId ?? null,
    userIds: [...(query.userId ?? [])].sort(),
    sessionIds: [...(query.sessionId ?? [])].sort(),
    title: query.title ?? null,
    titleLike: query.titleLike ?? null,
    metadata: [...(query.metadata ?? [])].sort(),
    updatedAfter: filter.updatedAfter?.toISOString() ?? null,
    updatedBefore: filter.updatedBefore?.toISOString() ?? null,
    orderBy: query.orderBy,
    order: query.order,
  };
  const after = query.pageToken ? positionFrom(tokens.decode(query.pageToken, fingerprint, ['time', 'id', 'id'])) : undefined;

  await findSpaceOrThrow(db, scope.accountId, scope.spaceId);
  const { rows, candidates } = await readRows(db, {
    filter,
    orderBy,
    direction: query.order,
    scope: scope.userId === undefined ? 'space' : 'user',
    after,
    limit: query.pageSize + 1,
    offset,
    maxBytes: limits.listPageBytes,
  });
  const page = rows.slice(0, query.pageSize);
  const last = page.at(-1);
  const result: ListPage<Row> = { rows: page };
  // More follow when the page query found more than the page holds: past pageSize, or past the
  // byte budget (a page shorter than pageSize with a nextPageToken).
  if (candidates > page.length && last) {
    result.nextPageToken = tokens.encode(fingerprint, [last[orderBy].toISOString(), last.user_id, last.session_id]);
  }
  if (query.includeTotal) result.totalCount = await countSessions(db, filter);
  return result;
}

function filterFrom(limits: Limits, scope: ListScope, query: ListSessionsQuery): SessionFilter {
  if (query.title !== undefined && query.titleLike !== undefined) throw invalidParameter('titleLike', 'give either title or titleLike, not both');
  const metadata = new Map<string, string[]>();
  for (const item of query.metadata ?? []) {
    const split = item.indexOf('=');
    if (split <= 0) throw invalidParameter('metadata', `"${item}" is not key=value`);
    const [key, value] = [item.slice(0, split), item.slice(split + 1)];
    metadata.set(key, [...(metadata.get(key) ?? []), value]);
    if (metadata.get(key)!.length > limits.filterValues) throw invalidParameter('metadata', `at most ${limits.filterValues} values per key (key "${key}")`);
  }
  // Each metadata key is one more condition; the other filters count once each.
  const others = [query.userId, query.sessionId, query.title, query.titleLike, query.updatedAfter, query.updatedBefore].filter((value) => value !== undefined);
  if (others.length + metadata.size > limits.filters) {
    throw invalidParameter('metadata', `at most ${limits.filters} filters may be combined (each metadata key counts as one)`);
  }
  return {
    accountId: scope.accountId,
    spaceId: scope.spaceId,
    userIds: scope.userId !== undefined ? [scope.userId] : query.userId,
    sessionIds: query.sessionId,
    title: query.title,
    titleLike: query.titleLike,
    metadata,
    updatedAfter: query.updatedAfter !== undefined ? new Date(query.updatedAfter) : undefined,
    updatedBefore: query.updatedBefore !== undefined ? new Date(query.updatedBefore) : undefined,
  };
}

function positionFrom([time, userId, sessionId]: [string, string, string]): { time: string; userId: string; sessionId: string } {
  return { time, userId, sessionId };
}

/** `expireTime` or `ttlSeconds` (never both); null clears the expiry; undefined when neither is given. */
function expiryFrom(expireTime: string | null | undefined, ttlSeconds: number | undefined): ExpirySetting | undefined {
  if (expireTime !== undefined && ttlSeconds !== undefined) throw invalidParameter('ttlSeconds', 'give either expireTime or ttlSeconds, not both');
  if (ttlSeconds !== undefined) return { ttlSeconds };
  if (expireTime === undefined || expireTime === null) return expireTime;
  const at = new Date(expireTime);
  if (at.getTime() <= Date.now()) throw invalidParameter('expireTime', 'must be in the future');
  return { at };
}

/** A whole metadata object has no removals: a null value is not a value. */
function withoutRemovals(metadata: Record<string, string | null>): Metadata {
  const entries = Object.entries(metadata);
  const removal = entries.find(([, value]) => value === null);
  if (removal) throw invalidParameter(`metadata.${removal[0]}`, 'must be a string');
  return Object.fromEntries(entries) as Metadata;
}

/** 400 InvalidParameter.Metadata naming each field (under `field`, `metadata` or `session.metadata`) when the rules refuse the change. */
export function assertValidMetadata(next: Metadata, previous: Metadata, field = 'metadata'): void {
  const issues = metadataIssues(next, previous).map((issue) => ({
    field: issue.key === undefined ? field : `${field}.${issue.key}`,
    message: issue.message,
  }));
  if (issues.length === 0) return;
  const summary = issues.map((issue) => `${issue.field}: ${issue.message}`).join('; ');
  throw new AppError('InvalidParameter.Metadata', summary, { details: { issues } });
}

function alreadyExists(row: SessionRow): AppError {
  return new AppError('FailedOperation.PreconditionFailed', `Session ${row.session_id} already exists (If-None-Match: *).`, {
    details: { currentRevision: row.revision },
    headers: { etag: etagOf(row.revision) },
  });
}

