// The agent's one call (SPEC 4.7): session, memo and a window of recent events from one snapshot,
// and the application's writes of its window start and memo.
import type { Transaction } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';
import { AppError, invalidParameter } from '../../errors.js';
import { assertIfMatch } from '../../http/preconditions.js';
import { type EventView, toEventView } from '../events/event.model.js';
import { type SessionView, toSessionView } from '../sessions/session.model.js';
import { MEMO_MAX_BYTES, readSessionView } from '../sessions/sessions.service.js';
import { findSpaceOrThrow } from '../spaces/space-lookup.js';
import { selectContextWindow, serializedSize } from './context-window.js';
import { lockSession } from '../sessions/sessions.repository.js';
import { type SessionKey, findSessionWithNewestEvents, listNewestEvents, updateContextFields } from './context.repository.js';
import type { ContextBudget, PutContextInput, SessionContextView } from './context.schemas.js';

export type { SessionKey } from './context.repository.js';

/**
 * The first read assumes events of about this many characters (an agent turn is typically a few
 * hundred to a couple of thousand): as many as maxChars would hold at that size, up to maxEvents.
 * With the default budget (100,000 characters, 100 events) a window of typical events is one read.
 * Later reads are sized by the average of the events read so far.
 */
const ASSUMED_EVENT_CHARS = 1000;
const MAX_PAGE = 1000;

/**
 * The session, its shared state and its events as one snapshot, even while appends go on. Events
 * are read newest first by keyset on the primary key, only as many as the budget can use, so the
 * cost does not depend on the length of the history.
 *
 * Usually one statement does it all (the session and the first page of events). Only when the
 * budget can use more events than that page held does the read start over in a REPEATABLE READ,
 * read-only transaction that pages on from the same snapshot.
 */
export async function readContext(db: Database, key: SessionKey, budget: ContextBudget): Promise<SessionContextView> {
  const firstPage = pageLimit(budget, { events: 0, chars: 0 });
  const row = await findSessionWithNewestEvents(db, key, firstPage);
  if (!row) throw await notFound(db, key);
  const { newest_events: newest, user_state: user, app_state: app, ...sessionRow } = row;
  const session = toSessionView(sessionRow, { user, app });
  const candidates: Candidates = { events: [], sizes: [], chars: 0 };
  for (const event of newest) addCandidate(candidates, toEventView({ ...event, event_time: new Date(event.event_time), create_time: new Date(event.create_time) }));
  const lastRead = newest.at(-1)?.seq ?? session.eventCount + 1;
  const complete = newest.length < firstPage || !wantsMore(candidates, { windowStartSeq: session.windowStartSeq, beforeSeq: lastRead, ...budget });
  return complete ? contextOf(session, candidates, budget) : readContextInSnapshot(db, key, budget);
}

function readContextInSnapshot(db: Database, key: SessionKey, budget: ContextBudget): Promise<SessionContextView> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const session = await readSessionView(trx, key);
      if (!session) throw await notFound(trx, key);
      const candidates = await readCandidates(trx, key, { windowStartSeq: session.windowStartSeq, lastSeq: session.eventCount, ...budget });
      return contextOf(session, candidates, budget);
    });
}

function contextOf(session: SessionView, candidates: Candidates, budget: ContextBudget): SessionContextView {
  // Read newest first; the window wants them oldest first.
  const window = selectContextWindow(candidates.events.reverse(), { ...budget, windowStartSeq: session.windowStartSeq }, candidates.sizes.reverse());
  return {
    session,
    memo: session.memo,
    events: window.events,
    window: { startSeq: window.startSeq, endSeq: window.endSeq, omittedEvents: window.omittedEvents },
  };
}

/** Events read so far, newest first, with their serialized sizes (measured once, reused by the selection). */
interface Candidates {
  events: EventView[];
  sizes: number[];
  chars: number;
}

function addCandidate(candidates: Candidates, event: EventView): void {
  const size = serializedSize(event);
  candidates.events.push(event);
  candidates.sizes.push(size);
  candidates.chars += size;
}

/**
 * Whether an older event could still join the window: reading stops at windowStartSeq, at maxEvents,
 * or once the events read exceed maxChars (an older event could then only join a run that is
 * already over budget).
 */
function wantsMore(candidates: Candidates, range: { windowStartSeq: number; beforeSeq: number; maxChars: number; maxEvents: number }): boolean {
  return range.beforeSeq > range.windowStartSeq && candidates.events.length < range.maxEvents && candidates.chars <= range.maxChars;
}

/** How many events the next read asks for: what the rest of the budget holds at the average size so far. */
function pageLimit(budget: ContextBudget, read: { events: number; chars: number }): number {
  const average = read.events === 0 ? ASSUMED_EVENT_CHARS : read.chars / read.events;
  const wanted = Math.ceil((budget.maxChars - read.chars) / Math.max(1, average)) + 1;
  return Math.min(budget.maxEvents - read.events, wanted, MAX_PAGE);
}

/** The newest events from windowStartSeq on, newest first: enough that the window can never need an older one. */
async function readCandidates(
  trx: Transaction<DB>,
  key: SessionKey,
  range: { windowStartSeq: number; lastSeq: number; maxChars: number; maxEvents: number },
): Promise<Candidates> {
  const candidates: Candidates = { events: [], sizes: [], chars: 0 };
  let beforeSeq = range.lastSeq + 1;
  while (wantsMore(candidates, { ...range, beforeSeq })) {
    const limit = pageLimit(range, { events: candidates.events.length, chars: candidates.chars });
    const rows = await listNewestEvents(trx, key, { fromSeq: range.windowStartSeq, beforeSeq, limit });
    for (const row of rows) addCandidate(candidates, toEventView(row));
    if (rows.length < limit) break;
    beforeSeq = rows.at(-1)!.seq;
  }
  return candidates;
}

/**
 * Stores the window start and/or memo under the session's row lock; answers the session (merged
 * state), whose revision is the new ETag.
 */
export async function writeContext(
  db: Database,
  key: SessionKey,
  input: PutContextInput,
  ifMatch: number[] | '*' | undefined,
): Promise<SessionView> {
  if (input.windowStartSeq === undefined && input.memo === undefined) throw invalidParameter('body', 'give at least one of windowStartSeq, memo');
  let memo: string | null | undefined;
  if (input.memo !== undefined) {
    memo = input.memo === null ? null : JSON.stringify(input.memo);
    if (memo !== null && Buffer.byteLength(memo) > MEMO_MAX_BYTES) throw invalidParameter('memo', `must be at most ${MEMO_MAX_BYTES} bytes serialized`);
  }

  return db.transaction().execute(async (trx) => {
    const current = await lockSession(trx, key);
    if (!current || current.expired) throw await notFound(trx, key);
    assertIfMatch(ifMatch, current.revision);
    if (input.windowStartSeq !== undefined && input.windowStartSeq > current.event_count + 1) {
      throw invalidParameter('windowStartSeq', `must be at most eventCount + 1 (${current.event_count + 1})`);
    }
    await updateContextFields(trx, key, { windowStartSeq: input.windowStartSeq, memo });
    // Read back through the one reader of sessions, so the answer has the merged state.
    const session = await readSessionView(trx, key);
    if (!session) throw new AppError('InternalError', 'The session vanished while it was locked.');
    return session;
  });
}

/** 404 for the session, or for its space when that is what is missing (or another account's). */
async function notFound(db: Database | Transaction<DB>, key: SessionKey): Promise<AppError> {
  await findSpaceOrThrow(db, key.accountId, key.spaceId);
  return new AppError('ResourceNotFound.Session', `Session ${key.sessionId} of user ${key.userId} was not found.`);
}
