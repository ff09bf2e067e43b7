// Appending events (docs/design.md §4.2–4.4): seq assignment, state deltas, size limits, If-Match and the
// session update happen all together or not at all.
//
// Round trips of an append (after authentication):
// - usually ONE: the call of append_events(), which updates the session row (taking its lock),
//   merges the deltas into the session, user and space states in the database, checks the limits
//   and If-Match, and inserts the events (append.repository.ts); on a busy instance that call may
//   carry other requests' appends too (append-batcher.ts: one round trip and one commit for all);
// - a retry (an eventId already stored), the same eventId twice in one request, or a refusal
//   (412/413) of a request that names eventIds takes the locked path: BEGIN, the session lock, the
//   stored events of the request's ids, then append_events() for the events that are new (or the
//   shared states, when every event is a replay), COMMIT. Retries are rare; they pay for themselves.
// - a missing session costs one more query to tell a missing space (404 SessionSpace) from it.
import type { Limits } from '../../config.js';
import type { AccountDatabases, Database } from '../../db/connect.js';
import type { EventRow } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import type { IfMatch } from '../../lib/preconditions.js';
import { type SessionViewWith, sessionNotFound, sessionViewWith } from '../sessions/index.js';
import { type StoredScope, lockSharedStates, mergedStateText, mergedStateView } from '../state/index.js';
import { type EventDocument, type PreparedEvent, eventDocument, foldedDocuments, planReplays, prepareAppend, writtenEventRow } from './append-plan.js';
import type { AppendBatcher } from './append-batcher.js';
import { type AppendedSession, StoredEventIdError, appendInDatabase } from './append.repository.js';
import { type EventView, toEventView } from './event.model.js';
import type { SessionKey } from '../../db/keys.js';
import { findEventsByEventIds, findLiveSessionId, lockSessionForUpdate } from './events.repository.js';
import type { AppendEventsBody } from './events.schemas.js';

export interface AppendEventsResult {
  /** true when every event of the request was already stored (a retry): nothing was written. */
  replayOnly: boolean;
  /** How many of `events` this request stored: they hold the session's newest seq numbers. */
  writtenCount: number;
  /** The serialized size of each state this request wrote, as the size limit measured it. */
  stateBytes: Partial<Record<StoredScope, number>>;
  /** The serialized size of the stateDeltas this request stored, as their limit measured them. */
  deltaBytes: number;
  events: EventView[];
  /** The session after the append, but for its merged state: that is `stateJson`. */
  session: SessionViewWith<undefined>;
  /**
   * The merged state view as JSON text: a state of up to a megabyte goes from PostgreSQL to the
   * answer without being parsed and written out again (events.routes.ts splices it in).
   */
  stateJson: string;
}

/**
 * The append path of one instance: its database, its limits and its group commit (none where a
 * process appends without batching, e.g. an import tool). buildApp makes one and hands it to the
 * routes of both faces through AppDeps.
 */
export interface AppendPath {
  append(key: SessionKey, body: AppendEventsBody, ifMatch: IfMatch): Promise<AppendEventsResult>;
}

/** What the routes that append (REST and API 3.0) need beside AppDeps. */
export interface AppendDeps {
  appendPath: AppendPath;
}

/**
 * What an append reads and writes outside the batcher is its account's work (db/fair-pool.ts):
 * `forAccount` gives the database as one account's; without it, `db` keeps to no account's share.
 */
export function createAppendPath(db: Database, limits: Limits, batcher?: AppendBatcher, forAccount: AccountDatabases = () => db): AppendPath {
  return { append: (key, body, ifMatch) => appendEvents(forAccount(key.accountId), limits, batcher, key, body, ifMatch) };
}

async function appendEvents(
  db: Database,
  limits: Limits,
  batcher: AppendBatcher | undefined,
  key: SessionKey,
  body: AppendEventsBody,
  ifMatch: IfMatch,
): Promise<AppendEventsResult> {
  const prepared = prepareAppend(body, limits);
  if (!prepared.repeatsAnId) {
    try {
      return await appendNew(db, limits, batcher, key, prepared.events, ifMatch);
    } catch (error) {
      // A retry is answered even where a new append would be refused (If-Match, limits): the
      // locked path decides, once the stored events are known.
      if (!(error instanceof StoredEventIdError || (prepared.givenIds.length > 0 && isRefusal(error)))) throw error;
    }
  }
  return appendUnderLock(db, limits, key, prepared.events, prepared.givenIds, ifMatch);
}

/** Every event is new (as far as the request knows): one statement. */
async function appendNew(
  db: Database,
  limits: Limits,
  batcher: AppendBatcher | undefined,
  key: SessionKey,
  events: PreparedEvent[],
  ifMatch: IfMatch,
): Promise<AppendEventsResult> {
  const documents = events.map(eventDocument);
  const sent = foldedDocuments(documents);
  const deltaBytes = events.reduce((sum, event) => sum + event.deltaBytes, 0);
  let session = await sendNew(db, limits, batcher, key, sent, ifMatch, deltaBytes);
  // The session was not found. On Citus that can be a shard split just committed: for a moment the
  // account's new shard is routed to before its copied rows are visible (test/citus/tenant-move.test.ts
  // saw it). If the session is there a moment later, the append is sent again. Only the 404 path
  // pays for this; on one PostgreSQL the session found now was created meanwhile, and appending to
  // it is what the caller asked for.
  if (!session && (await sessionAppearsAfterAPause(db, key))) session = await sendNew(db, limits, batcher, key, sent, ifMatch, deltaBytes);
  if (!session) throw await sessionNotFound(db, key);
  const written = writtenViews(documents, session);
  return appended(key, session, events, documents.map((_, index) => written(index)));
}

/**
 * The append of new events, through the group commit where the instance has one. A function of the
 * module, not a closure of appendNew: `tsx` (npm start) names every closure it sees bound to a
 * name, a property definition per append.
 */
function sendNew(
  db: Database,
  limits: Limits,
  batcher: AppendBatcher | undefined,
  key: SessionKey,
  documents: EventDocument[],
  ifMatch: IfMatch,
  deltaBytes: number,
): Promise<AppendedSession | undefined> {
  return batcher ? batcher.append(key, documents, revisionsOf(ifMatch), deltaBytes, db) : appendInDatabase(db, key, documents, revisionsOf(ifMatch), limits.stateBytes);
}

/**
 * Under the session's lock: which events of the request are stored already (replays), and the
 * append of the others. The lock is taken first, so the lookup sees every earlier append.
 */
async function appendUnderLock(
  db: Database,
  limits: Limits,
  key: SessionKey,
  events: PreparedEvent[],
  givenIds: string[],
  ifMatch: IfMatch,
): Promise<AppendEventsResult> {
  return db.transaction().execute(async (trx) => {
    const locked = await lockSessionForUpdate(trx, key);
    if (!locked) throw await sessionNotFound(trx, key);
    const stored = new Map((await findEventsByEventIds(trx, key, givenIds)).map((row) => [row.event_id, row]));
    const plan = planReplays(events, stored);
    if (plan.fresh.length === 0) {
      // A pure retry writes nothing, so If-Match is not held against it: the caller's earlier
      // attempt (the one whose answer was lost) is what moved the revision on.
      const shared = await lockSharedStates(trx, key, new Set());
      const answers = plan.answers.map((answer) => toEventView((answer as { stored: EventRow }).stored));
      const stateJson = JSON.stringify(mergedStateView({ session: locked.state, user: shared.user, app: shared.app }));
      return { replayOnly: true, writtenCount: 0, stateBytes: {}, deltaBytes: 0, events: answers, session: sessionViewWith(key, locked, undefined), stateJson };
    }
    const documents = plan.fresh.map(eventDocument);
    const session = await appendInDatabase(trx, key, foldedDocuments(documents), revisionsOf(ifMatch), limits.stateBytes);
    if (!session) throw new AppError('InternalError', 'The session vanished while it was locked.');
    const written = writtenViews(documents, session);
    const answers = plan.answers.map((answer) => ('stored' in answer ? toEventView(answer.stored) : written(answer.fresh)));
    return appended(key, session, plan.fresh, answers);
  });
}

const MISSING_SESSION_RECHECK_MS = 50;

async function sessionAppearsAfterAPause(db: Database, key: SessionKey): Promise<boolean> {
  await new Promise((resolve) => setTimeout(resolve, MISSING_SESSION_RECHECK_MS));
  return (await findLiveSessionId(db, key)) !== undefined;
}

/** The view of the i-th event written: its seq follows from the session's new count, its time is the append's. */
function writtenViews(documents: EventDocument[], session: AppendedSession): (index: number) => EventView {
  const firstSeq = session.event_count - documents.length + 1;
  return (index) => toEventView(writtenEventRow(documents[index]!, firstSeq + index, session.update_time));
}

/** The answer of an append that stored `fresh` (in seq order); `events` answers each input. */
function appended(key: SessionKey, session: AppendedSession, fresh: PreparedEvent[], events: EventView[]): AppendEventsResult {
  const stateBytes: AppendEventsResult['stateBytes'] = {};
  if (session.session_bytes !== null) stateBytes.session = session.session_bytes;
  if (session.user_bytes !== null) stateBytes.user = session.user_bytes;
  if (session.app_bytes !== null) stateBytes.app = session.app_bytes;
  const deltaBytes = fresh.reduce((sum, event) => sum + event.deltaBytes, 0);
  // The row's states are JSON text; the view's state is given apart, as stateJson.
  const view = sessionViewWith(key, session, undefined);
  const stateJson = mergedStateText(session.state, session.user_state, session.app_state);
  return { replayOnly: false, writtenCount: fresh.length, stateBytes, deltaBytes, events, session: view, stateJson };
}

const isRefusal = (error: unknown) =>
  error instanceof AppError && (error.code === 'FailedOperation.PreconditionFailed' || error.code === 'LimitExceeded.State');

/** `*` asks only that the session exists, which the append checks anyway. */
const revisionsOf = (ifMatch: IfMatch): number[] | undefined => (ifMatch === '*' ? undefined : ifMatch);
