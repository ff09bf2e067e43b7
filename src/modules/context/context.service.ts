// The agent's one call (SPEC 4.7): session, memo and a window of recent events from one snapshot,
// and the application's writes of its window start and memo.
import type { Transaction } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';
import { AppError, invalidParameter } from '../../errors.js';
import { assertIfMatch } from '../../http/preconditions.js';
import { type EventView, toEventView } from '../events/event.model.js';
import type { SessionView } from '../sessions/session.model.js';
import { MEMO_MAX_BYTES, readSessionView } from '../sessions/sessions.service.js';
import { findSpaceOrThrow } from '../spaces/space-lookup.js';
import { selectContextWindow, serializedSize } from './context-window.js';
import { lockSession } from '../sessions/sessions.repository.js';
import { type SessionKey, listNewestEvents, updateContextFields } from './context.repository.js';
import type { ContextBudget, PutContextInput, SessionContextView } from './context.schemas.js';

export type { SessionKey } from './context.repository.js';

/** The first read is small: most windows are a few dozen events. Later reads are sized by the average event. */
const FIRST_PAGE = 64;
const MAX_PAGE = 1000;

/**
 * One REPEATABLE READ, read-only transaction: the session, its shared state and its events are one
 * snapshot even while appends go on. Events are read newest first by keyset on the primary key,
 * only as many as the budget can use, so the cost does not depend on the length of the history.
 */
export async function readContext(db: Database, key: SessionKey, budget: ContextBudget): Promise<SessionContextView> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const session = await readSessionView(trx, key);
      if (!session) throw await notFound(trx, key);
      const { windowStartSeq } = session;
      const candidates = await readCandidates(trx, key, { windowStartSeq, lastSeq: session.eventCount, ...budget });
      const window = selectContextWindow(candidates, { ...budget, windowStartSeq });
      return {
        session,
        memo: session.memo,
        events: window.events,
        window: { startSeq: window.startSeq, endSeq: window.endSeq, omittedEvents: window.omittedEvents },
      };
    });
}

/**
 * The newest events from windowStartSeq on, oldest first: enough that the window can never need an
 * older one. Reading stops at maxEvents, or once the events read exceed maxChars (an older event
 * could then only join a run that is already over budget).
 */
async function readCandidates(
  trx: Transaction<DB>,
  key: SessionKey,
  range: { windowStartSeq: number; lastSeq: number; maxChars: number; maxEvents: number },
): Promise<EventView[]> {
  const newestFirst: EventView[] = [];
  let chars = 0;
  let beforeSeq = range.lastSeq + 1;
  while (beforeSeq > range.windowStartSeq && newestFirst.length < range.maxEvents && chars <= range.maxChars) {
    const average = newestFirst.length === 0 ? 0 : chars / newestFirst.length;
    const wanted = average === 0 ? FIRST_PAGE : Math.ceil((range.maxChars - chars) / average) + 1;
    const limit = Math.min(range.maxEvents - newestFirst.length, wanted, MAX_PAGE);
    const rows = await listNewestEvents(trx, key, { fromSeq: range.windowStartSeq, beforeSeq, limit });
    for (const row of rows) {
      const event = toEventView(row);
      newestFirst.push(event);
      chars += serializedSize(event);
    }
    if (rows.length < limit) break;
    beforeSeq = rows.at(-1)!.seq;
  }
  return newestFirst.reverse();
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
async function notFound(db: Transaction<DB>, key: SessionKey): Promise<AppError> {
  await findSpaceOrThrow(db, key.accountId, key.spaceId);
  return new AppError('ResourceNotFound.Session', `Session ${key.sessionId} of user ${key.userId} was not found.`);
}
