// The agent's one call per turn (docs/design.md §4.7): session, memo and a window of recent events from one
// snapshot, and the application's writes of its window start and memo.
//
// Round trips of GET …/context, the common path (the budget is met by the first page of events,
// always so with maxEvents ≤ 101):
//   1. authentication, the credential lookup (src/http/auth.ts; an in-process cache replaces it);
//   2. the read, ONE statement (findSessionWithNewestEvents): the live session with its user's and
//      its space's state, already as the API's JSON, and its newest events as JSON text. It is a
//      named statement (src/db/prepared-statements.ts): planning it cost more than running it.
// Authorization (src/http/authorization.ts) reads nothing for an allowed principal, and nothing
// else looks the space up. Only on the way to an error: a missing session costs one more query
// (findSpaceOrThrow), to tell ResourceNotFound.SessionSpace from ResourceNotFound.Session; a denied
// principal costs the same lookup, to answer 404 rather than 403 for another account's space.
// Only when the budget can use more events than the first page held (a large maxEvents and small
// events): BEGIN REPEATABLE READ READ ONLY, the same statement, further pages, COMMIT.
//
// Node parses none of the answer: it measures each event's text (compactJsonLength, the same count
// as JSON.stringify of the event), selects the window from the sizes and the events' call and
// response ids, and joins the chosen texts. Only a newest event over budget on its own is parsed,
// to cut its text (truncateText).
import type { Transaction } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';
import { AppError, invalidParameter } from '../../errors.js';
import { type IfMatch, assertIfMatch } from '../../lib/preconditions.js';
import { compactJsonLength } from '../../lib/json-measure.js';
import { parseJson } from '../../lib/parse-json.js';
import {
  type SessionView,
  type SessionJsonRow,
  MEMO_MAX_BYTES,
  readSessionView,
  sessionNotFound,
  lockSession,
} from '../sessions/index.js';
import { type WindowEvent, type WindowPart, selectWindowRange, truncateText } from './context-window.js';
import type { SessionKey } from '../../db/keys.js';
import { type EventJsonRow, findSessionWithNewestEvents, listNewestEvents, updateContextFields } from './context.repository.js';
import type { ContextBudget, PutContextInput } from './context.schemas.js';


/**
 * The first read assumes events of about this many characters (an agent turn is typically a few
 * hundred to a couple of thousand): as many as maxChars would hold at that size, up to maxEvents.
 * With the default budget (100,000 characters, 100 events) a window of typical events is one read.
 * Later reads are sized by the average of the events read so far.
 */
const ASSUMED_EVENT_CHARS = 1000;
const MAX_PAGE = 1000;

/** The SessionContext answer as JSON text, sent as it is, and the revision for its ETag. */
export interface SessionContextJson {
  json: string;
  revision: number;
}

/**
 * The session, its shared state and its events as one snapshot, even while appends go on. Events
 * are read newest first by keyset on the primary key, only as many as the budget can use, so the
 * cost does not depend on the length of the history.
 *
 * Usually one statement does it all (the session and the first page of events). Only when the
 * budget can use more events than that page held does the read start over in a REPEATABLE READ,
 * read-only transaction that pages on from the same snapshot.
 */
export async function readContext(db: Database, key: SessionKey, budget: ContextBudget): Promise<SessionContextJson> {
  const firstPage = pageLimit(budget, { events: 0, chars: 0 });
  const read = await findSessionWithNewestEvents(db, key, firstPage);
  if (!read) throw await sessionNotFound(db, key);
  const { session, newest } = read;
  const candidates = newCandidates();
  for (const event of newest) addCandidate(candidates, event);
  const lastRead = newest.at(-1)?.seq ?? session.event_count + 1;
  const complete = newest.length < firstPage || !wantsMore(candidates, { windowStartSeq: session.window_start_seq, beforeSeq: lastRead, ...budget });
  return complete ? contextOf(session, candidates, budget) : readContextInSnapshot(db, key, budget);
}

function readContextInSnapshot(db: Database, key: SessionKey, budget: ContextBudget): Promise<SessionContextJson> {
  return db
    .transaction()
    .setIsolationLevel('repeatable read')
    .setAccessMode('read only')
    .execute(async (trx) => {
      const firstPage = pageLimit(budget, { events: 0, chars: 0 });
      const read = await findSessionWithNewestEvents(trx, key, firstPage);
      if (!read) throw await sessionNotFound(trx, key);
      const candidates = newCandidates();
      for (const event of read.newest) addCandidate(candidates, event);
      const range = { windowStartSeq: read.session.window_start_seq, lastSeq: read.session.event_count, ...budget };
      if (read.newest.length === firstPage) await readMoreCandidates(trx, key, candidates, range);
      return contextOf(read.session, candidates, budget);
    });
}

function contextOf(session: SessionJsonRow, candidates: Candidates, budget: ContextBudget): SessionContextJson {
  // Read newest first; the window wants them oldest first.
  const { events, texts, sizes } = candidates;
  events.reverse();
  texts.reverse();
  sizes.reverse();
  const window = selectWindowRange(events, { ...budget, windowStartSeq: session.window_start_seq }, sizes);
  const chosen = window.truncateNewest ? [JSON.stringify(truncateText(parseJson(texts.at(-1)!) as WindowEvent, budget.maxChars))] : texts.slice(window.from);
  const windowJson = `{"startSeq":${window.startSeq},"endSeq":${window.endSeq},"omittedEvents":${window.omittedEvents}}`;
  return {
    json: `{"session":${session.session_json},"memo":${session.memo_json ?? 'null'},"events":[${chosen.join(',')}],"window":${windowJson}}`,
    revision: session.revision,
  };
}

/**
 * Events read so far, newest first: what the selection looks at (seq, calls and responses), their
 * JSON text and its size (JSON.stringify's count, measured once on the text).
 */
interface Candidates {
  events: WindowEvent[];
  texts: string[];
  sizes: number[];
  chars: number;
}

const newCandidates = (): Candidates => ({ events: [], texts: [], sizes: [], chars: 0 });

function addCandidate(candidates: Candidates, event: EventJsonRow): void {
  const size = compactJsonLength(event.json);
  const parts = event.window_parts === null ? undefined : (parseJson(event.window_parts) as WindowPart[]);
  candidates.events.push(parts ? { seq: event.seq, content: { parts } } : { seq: event.seq });
  candidates.texts.push(event.json);
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

/** Reads older events, newest first, until the window can never need an older one. */
async function readMoreCandidates(
  trx: Transaction<DB>,
  key: SessionKey,
  candidates: Candidates,
  range: { windowStartSeq: number; lastSeq: number; maxChars: number; maxEvents: number },
): Promise<void> {
  let beforeSeq = candidates.events.at(-1)?.seq ?? range.lastSeq + 1;
  while (wantsMore(candidates, { ...range, beforeSeq })) {
    const limit = pageLimit(range, { events: candidates.events.length, chars: candidates.chars });
    const rows = await listNewestEvents(trx, key, { fromSeq: range.windowStartSeq, beforeSeq, limit });
    for (const row of rows) addCandidate(candidates, row);
    if (rows.length < limit) break;
    beforeSeq = rows.at(-1)!.seq;
  }
}

/**
 * Stores the window start and/or memo under the session's row lock; answers the session (merged
 * state), whose revision is the new ETag.
 */
export async function writeContext(
  db: Database,
  key: SessionKey,
  input: PutContextInput,
  ifMatch: IfMatch,
): Promise<SessionView> {
  if (input.windowStartSeq === undefined && input.memo === undefined) throw invalidParameter('body', 'give at least one of windowStartSeq, memo');
  let memo: string | null | undefined;
  if (input.memo !== undefined) {
    memo = input.memo === null ? null : JSON.stringify(input.memo);
    if (memo !== null && Buffer.byteLength(memo) > MEMO_MAX_BYTES) throw invalidParameter('memo', `must be at most ${MEMO_MAX_BYTES} bytes serialized`);
  }

  return db.transaction().execute(async (trx) => {
    const current = await lockSession(trx, key);
    if (!current || current.expired) throw await sessionNotFound(trx, key);
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

