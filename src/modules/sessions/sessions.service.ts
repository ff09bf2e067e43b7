// Session rules: idempotent create, describe, modify with preconditions, delete, and the lists.
// Each write runs in one transaction; expired sessions behave as absent everywhere.
import type { Transaction } from 'kysely';
import type { Limits } from '../../config.js';
import type { Database } from '../../db/connect.js';
import type { DB, JsonObject, SessionRow } from '../../db/schema.js';
import { AppError, invalidParameter } from '../../errors.js';
import { decodePageToken, encodePageToken } from '../../http/page-token.js';
import { assertIfMatch, etagOf } from '../../http/preconditions.js';
import { newSessionId } from '../../lib/ids.js';
import { jsonBytes } from '../../lib/json-measure.js';
import { findSpaceOrThrow } from '../spaces/space-lookup.js';
import { applyMergePatch } from '../state/merge-patch.js';
import { type ScopedStates, type StoredScope, applyScopedDelta, scopesTouched, splitByScope } from '../state/scoped-state.js';
import { type Metadata, metadataIssues } from './metadata-rules.js';
import { findSessionJson } from './session-json.repository.js';
import { type SessionView, type SharedStates, toSessionView } from './session.model.js';
import type { CreateSessionInput, ListSessionsQuery, ModifySessionInput } from './sessions.schemas.js';
import {
  type ExpirySetting,
  type SessionFilter,
  type SessionKey,
  type UserKey,
  adjustSessionCount,
  countSessions,
  deleteSessionRow,
  ensureSpaceUser,
  findLiveSessionWithSharedState,
  insertSessionIfAbsent,
  listSessionRows,
  lockSession,
  lockSpaceState,
  lockUserState,
  readSharedStates,
  saveSpaceState,
  saveUserState,
  updateSessionRow,
} from './sessions.repository.js';

export const MEMO_MAX_BYTES = 64 * 1024;

type IfMatch = number[] | '*' | undefined;

export interface CreatedSession {
  session: SessionView;
  created: boolean;
}

/**
 * Creates the session, or answers the existing one unchanged (SPEC 4.1). An expired session with
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
      const inserted = await insertSessionIfAbsent(trx, key, fields);
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
      const fresh = await insertSessionIfAbsent(trx, key, fields);
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
  if (!session) throw await notFound(db, key);
  return { json: session.session_json, revision: session.revision };
}

/**
 * The session as the API shows it (merged state: session keys plus the user's `user:*` and the
 * space's `app:*` keys), read in one query; undefined when it is missing or expired. Every module
 * that answers a session reads it through here. Inside a transaction, pass the transaction.
 */
export async function readSessionView(db: Database | Transaction<DB>, key: SessionKey): Promise<SessionView | undefined> {
  const row = await findLiveSessionWithSharedState(db, key);
  return row ? sessionViewOf(row) : undefined;
}

function sessionViewOf(row: SessionRow & { user_state: JsonObject; app_state: JsonObject }): SessionView {
  return toSessionView(row, { user: row.user_state, app: row.app_state });
}

/**
 * The user's and the space's state for a transaction that holds the session row (or has just
 * inserted it). The scopes it will write are locked, always in the order user then space, so that
 * writers touching both scopes cannot deadlock; the others are read without a lock.
 */
export async function lockSharedStates(trx: Transaction<DB>, user: UserKey, writing: ReadonlySet<StoredScope>): Promise<SharedStates> {
  const { user: userState, app: appState } = await lockWrittenSharedStates(trx, user, writing);
  if (userState !== undefined && appState !== undefined) return { user: userState, app: appState };
  const read = await readSharedStates(trx, user);
  if (!read) throw new AppError('ResourceNotFound.SessionSpace', `Session space ${user.spaceId} was not found.`);
  return { user: userState ?? read.user, app: appState ?? read.app };
}

/**
 * Only the locking half of lockSharedStates: the user's and the space's state rows that `writing`
 * names, locked in the same order; the scopes not written are left out (an append reads them in
 * its write statement instead of a round trip of their own).
 */
export async function lockWrittenSharedStates(trx: Transaction<DB>, user: UserKey, writing: ReadonlySet<StoredScope>): Promise<Partial<SharedStates>> {
  const locked: Partial<SharedStates> = {};
  if (writing.has('user')) locked.user = await lockUserState(trx, user);
  if (writing.has('app')) locked.app = await lockSpaceState(trx, user.accountId, user.spaceId);
  return locked;
}

/**
 * Writes the user's and the space's state where they changed, after checking each against the state
 * size limit (413, and the caller's transaction rolls back: nothing is written).
 */
export async function saveSharedStates(
  trx: Transaction<DB>,
  limits: Limits,
  user: UserKey,
  before: SharedStates,
  after: ScopedStates,
): Promise<Partial<Record<keyof SharedStates, number>>> {
  // Only a changed scope is measured: an unchanged one is not written, and measuring it would
  // serialize a state of up to MAX_STATE_BYTES on every append for nothing.
  const userChanged = after.user !== before.user;
  const appChanged = after.app !== before.app;
  const bytes: Partial<Record<keyof SharedStates, number>> = {};
  if (userChanged) bytes.user = assertStateWithinLimit(limits, 'user', after.user);
  if (appChanged) bytes.app = assertStateWithinLimit(limits, 'app', after.app);
  if (userChanged) await saveUserState(trx, user, after.user);
  if (appChanged) await saveSpaceState(trx, user.accountId, user.spaceId, after.app);
  return bytes;
}

const SCOPE_NAMES: Record<StoredScope, string> = { session: 'session', user: "user's", app: "space's (app)" };

/**
 * 413 when one scope's state would be over the limit; the size limit applies to each scope apart.
 * Returns the size it measured (the append metrics report it).
 */
export function assertStateWithinLimit(limits: Limits, scope: StoredScope, state: JsonObject, serialized?: string): number {
  // `serialized`: the state's JSON when the caller has it already (it is about to write it).
  const stateBytes = serialized === undefined ? jsonBytes(state) : Buffer.byteLength(serialized, 'utf8');
  if (stateBytes <= limits.stateBytes) return stateBytes;
  throw new AppError('LimitExceeded.State', `The ${SCOPE_NAMES[scope]} state would be ${stateBytes} bytes serialized; the limit is ${limits.stateBytes}. Nothing was changed.`, {
    details: { scope, stateBytes, limit: limits.stateBytes },
  });
}

export async function modifySession(db: Database, key: SessionKey, input: ModifySessionInput, ifMatch: IfMatch): Promise<SessionView> {
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
    if (!current || current.expired) throw await notFound(trx, key);
    assertIfMatch(ifMatch, current.revision);
    let metadata: Metadata | undefined;
    if (input.metadata !== undefined) {
      metadata = applyMergePatch(current.metadata, input.metadata) as Metadata;
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
    if (!current || current.expired) throw await notFound(trx, key);
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

/** One user's sessions (`userId` given) or a whole space's (admin view, optional user/session filters). */
export async function listSessions(
  db: Database,
  limits: Limits,
  scope: { accountId: string; spaceId: string; userId?: string },
  query: ListSessionsQuery,
): Promise<SessionPage> {
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
  const after = query.pageToken ? positionFrom(decodePageToken(query.pageToken, fingerprint)) : undefined;

  await findSpaceOrThrow(db, scope.accountId, scope.spaceId);
  const rows = await listSessionRows(db, {
    filter,
    orderBy,
    direction: query.order,
    scope: scope.userId === undefined ? 'space' : 'user',
    after,
    limit: query.pageSize + 1,
  });
  const page = rows.slice(0, query.pageSize);
  const last = page.at(-1);
  const result: SessionPage = { sessions: page.map(sessionViewOf) };
  if (rows.length > query.pageSize && last) {
    result.nextPageToken = encodePageToken(fingerprint, [last[orderBy].toISOString(), last.user_id, last.session_id]);
  }
  if (query.includeTotal) result.totalCount = await countSessions(db, filter);
  return result;
}

function filterFrom(limits: Limits, scope: { accountId: string; spaceId: string; userId?: string }, query: ListSessionsQuery): SessionFilter {
  if (query.title !== undefined && query.titleLike !== undefined) throw invalidParameter('titleLike', 'give either title or titleLike, not both');
  const metadata = new Map<string, string[]>();
  for (const item of query.metadata ?? []) {
    const split = item.indexOf('=');
    if (split <= 0) throw invalidParameter('metadata', `"${item}" is not key=value`);
    const [key, value] = [item.slice(0, split), item.slice(split + 1)];
    metadata.set(key, [...(metadata.get(key) ?? []), value]);
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

function positionFrom(position: (string | number)[]): { time: string; userId: string; sessionId: string } {
  const [time, userId, sessionId] = position;
  if (typeof time !== 'string' || Number.isNaN(Date.parse(time)) || typeof userId !== 'string' || typeof sessionId !== 'string') {
    throw new AppError('InvalidParameter.PageToken', 'pageToken is invalid: it is not a token this service issued.', {
      details: { issues: [{ field: 'pageToken', message: 'it is not a token this service issued' }] },
    });
  }
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

function assertValidMetadata(next: Metadata, previous: Metadata): void {
  const issues = metadataIssues(next, previous).map((issue) => ({
    field: issue.key === undefined ? 'metadata' : `metadata.${issue.key}`,
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

/** 404 for the session, or for its space when that is what is missing (or another account's). */
async function notFound(db: Parameters<typeof findSpaceOrThrow>[0], key: SessionKey): Promise<AppError> {
  await findSpaceOrThrow(db, key.accountId, key.spaceId);
  return new AppError('ResourceNotFound.Session', `Session ${key.sessionId} of user ${key.userId} was not found.`);
}
