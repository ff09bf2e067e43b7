// Export and import of one session with its whole history (docs/design.md §4.9).
//
// Export needs no long transaction for a consistent document: events are append-only with gap-free
// seq, so once the session row says eventCount = N, events 1..N never change while it lives. The
// header (session, user and space state) is one query; the events follow in seq-ordered chunks,
// handed out one chunk at a time so a large history is streamed, not held in memory.
//
// Import writes the session exactly as exported (ids, seq, timestamps, revision, memo, window), in
// one transaction, after the route's schema has checked the whole document.
import type { Insertable } from 'kysely';
import type { Limits } from '../../config.js';
import type { Database } from '../../db/connect.js';
import type { EventsTable, JsonObject } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { canonicalJson, sha256 } from '../../lib/canonical-json.js';
import { type EventView, toEventView } from '../events/index.js';
import {
  type SessionView,
  assertValidMetadata,
  toSessionView,
  sessionNotFound,
  deleteSessionRow,
  ensureSpaceUser,
  findLiveSessionWithScopes,
  insertSessionIfAbsent,
  lockSession,
} from '../sessions/index.js';
import { APP_PREFIX, USER_PREFIX, assertStateWithinLimit } from '../state/index.js';
import { type ExportedSessionValue, type ImportBodyValue, type ImportedEventValue, EXPORT_FORMAT } from './transfer.schemas.js';
import type { SessionKey } from '../../db/keys.js';
import {
  insertEventRows,
  mergeSpaceState,
  mergeUserState,
  readEventRange,
} from './transfer.repository.js';
import { findSpaceOrThrow } from '../spaces/index.js';

/** Events read per query while exporting. */
const EXPORT_CHUNK = 1000;

export interface SessionExport {
  format: typeof EXPORT_FORMAT;
  session: ExportedSessionValue;
  /** The events 1..eventCount in order, one chunk at a time. */
  eventChunks: () => AsyncGenerator<EventView[]>;
}

/** Only the keys of the scope (the ones a session read shows); a stray key stays where it is. */
const keysWithPrefix = (state: JsonObject, prefix: string): JsonObject => Object.fromEntries(Object.entries(state).filter(([key]) => key.startsWith(prefix)));

/**
 * 404 before anything is streamed when the session (or its space) is missing or expired. Each
 * chunk's read of events goes through `eachRead` (the route runs it in an expensive slot).
 */
export async function openExport(db: Database, key: SessionKey, eachRead: <T>(read: () => Promise<T>) => Promise<T> = (read) => read()): Promise<SessionExport> {
  const found = await findLiveSessionWithScopes(db, key);
  if (!found) throw await sessionNotFound(db, key);
  const { session: row, userState, appState } = found;
  const session: ExportedSessionValue = {
    spaceId: row.space_id,
    userId: row.user_id,
    sessionId: row.session_id,
    title: row.title,
    metadata: row.metadata,
    state: row.state,
    scopedState: { user: keysWithPrefix(userState, USER_PREFIX), app: keysWithPrefix(appState, APP_PREFIX) },
    memo: row.memo,
    windowStartSeq: row.window_start_seq,
    eventCount: row.event_count,
    revision: row.revision,
    createTime: row.create_time.toISOString(),
    updateTime: row.update_time.toISOString(),
    expireTime: row.expire_time ? row.expire_time.toISOString() : null,
  };
  const eventCount = row.event_count;
  async function* eventChunks(): AsyncGenerator<EventView[]> {
    for (let from = 1; from <= eventCount; from += EXPORT_CHUNK) {
      const to = Math.min(from + EXPORT_CHUNK - 1, eventCount);
      const rows = await eachRead(() => readEventRange(db, key, from, to));
      // Short only when the session was deleted (or expired and swept) during the export: the
      // status line is already sent, so the stream is broken off rather than completed wrongly.
      if (rows.length !== to - from + 1) throw new Error(`Session ${key.sessionId} changed during the export (events ${from}..${to} missing).`);
      yield rows.map(toEventView);
    }
  }
  return { format: EXPORT_FORMAT, session, eventChunks };
}

/**
 * Re-creates the session in the space of `target`. 409 when a live session with that user and id
 * exists there; an expired one is replaced, as create does. The document's user: and app: keys
 * are merged into the target's user and space state: top-level keys of the document replace the
 * stored ones, other stored keys stay.
 */
export async function importSession(db: Database, limits: Limits, target: { accountId: string; spaceId: string }, doc: ImportBodyValue): Promise<SessionView> {
  const { session } = doc;
  assertValidMetadata(session.metadata, {}, 'session.metadata');
  assertStateWithinLimit(limits, 'session', session.state);
  assertStateWithinLimit(limits, 'user', session.scopedState.user);
  assertStateWithinLimit(limits, 'app', session.scopedState.app);
  const key: SessionKey = { ...target, userId: session.userId, sessionId: session.sessionId };
  const eventRows = doc.events.map((event) => toEventRow(key, event));

  return db.transaction().execute(async (trx) => {
    // Lock order as in appends (session, then user, then space state), so the two cannot deadlock.
    // FOR KEY SHARE keeps the space from being deleted until the import commits, yet lets other
    // transactions (and this one) update its state: a plain UPDATE takes FOR NO KEY UPDATE, which
    // does not conflict with it, so concurrent imports into one space cannot deadlock on a lock upgrade.
    const space = await findSpaceOrThrow(trx, target.accountId, target.spaceId, 'key-share');
    await ensureSpaceUser(trx, key);
    let addedSessions = 1;
    const existing = await lockSession(trx, key);
    if (existing && !existing.expired) throw sessionExists(key);
    if (existing) {
      // Replacing an expired session keeps the user's session count as it was.
      await deleteSessionRow(trx, key);
      addedSessions = 0;
    }
    const inserted = await insertSessionIfAbsent(trx, {
      account_id: key.accountId,
      space_id: key.spaceId,
      user_id: key.userId,
      session_id: key.sessionId,
      title: session.title,
      metadata: JSON.stringify(session.metadata),
      state: JSON.stringify(session.state),
      memo: session.memo === null ? null : JSON.stringify(session.memo),
      window_start_seq: session.windowStartSeq,
      event_count: session.eventCount,
      revision: session.revision,
      create_time: new Date(session.createTime),
      update_time: new Date(session.updateTime),
      expire_time: session.expireTime === null ? null : new Date(session.expireTime),
    });
    // A concurrent create or import of the same key won the race.
    if (!inserted) throw sessionExists(key);
    await insertEventRows(trx, eventRows);

    const userState = await mergeUserState(trx, key, session.scopedState.user, addedSessions);
    assertStateWithinLimit(limits, 'user', userState);
    let appState = space.state;
    if (Object.keys(session.scopedState.app).length > 0) {
      appState = await mergeSpaceState(trx, target.accountId, target.spaceId, session.scopedState.app);
      assertStateWithinLimit(limits, 'app', appState);
    }
    return toSessionView(inserted, { user: userState, app: appState });
  });
}

/**
 * The payload hash an idempotent append compares a retry against. The original request is not in
 * the document, so the hash is that of the event as the export shows it, without seq and
 * createTime (timestamp normalised to UTC milliseconds): a client that resends an imported event
 * exactly as exported gets a replay (200); a different payload with that eventId is a 409.
 */
export function importedPayloadHash(event: ImportedEventValue): Buffer {
  const { seq: _seq, createTime: _createTime, ...sent } = event;
  return sha256(canonicalJson({ ...sent, timestamp: new Date(sent.timestamp).toISOString() }));
}

function toEventRow(key: SessionKey, event: ImportedEventValue): Insertable<EventsTable> {
  const json = (value: unknown) => (value === undefined ? null : JSON.stringify(value));
  return {
    account_id: key.accountId,
    space_id: key.spaceId,
    user_id: key.userId,
    session_id: key.sessionId,
    seq: event.seq,
    event_id: event.eventId,
    invocation_id: event.invocationId ?? null,
    author: event.author,
    content: json(event.content),
    actions: json(event.actions),
    metadata: json(event.metadata),
    extensions: json(event.extensions),
    error_code: event.errorCode ?? null,
    error_message: event.errorMessage ?? null,
    event_time: new Date(event.timestamp),
    create_time: new Date(event.createTime),
    payload_hash: importedPayloadHash(event),
  };
}

function sessionExists(key: SessionKey): AppError {
  return new AppError('ResourceInUse.SessionExists', `Session ${key.sessionId} of user ${key.userId} already exists in space ${key.spaceId}. Nothing was imported.`);
}
