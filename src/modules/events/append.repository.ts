// The append's statements: one call of append_events() (migrations/0004_append_in_database.sql),
// the group commit's call of append_events_batch_whole() and, when that refuses the batch,
// append_events_batch() or, on Citus, append_events_of_account() (migrations 0007, 0011, 0014), and
// the database's answers to them turned into the API's (the SQLSTATEs they raise, at this boundary).
import { CompiledQuery } from 'kysely';
import { detectCitus } from '../../db/citus.js';
import type { Database, Executor } from '../../db/connect.js';
import { isShardMovedAway, violatesUniqueKey } from '../../db/errors.js';
import { ConnectionStateError } from '../../db/guarded-pool.js';
import { preparedStatement } from '../../db/prepared-statements.js';
import { CONSTRAINT, SQLSTATE } from '../../db/sqlstate.js';
import { AppError } from '../../errors.js';
import { preconditionFailed } from '../../lib/preconditions.js';
import type { SessionKey } from '../../db/keys.js';
import { stateLimitExceeded, type StoredScope } from '../state/index.js';
import { APPEND_ANSWER_SELECT, type AppendedSession, STATES_AS_TEXT_ONCE, measuredAnswerSelect } from './append-answer.js';
import type { EventDocument } from './append-plan.js';

export type { AppendedSession } from './append-answer.js';

/** append_events() found an eventId of the request already stored (unique violation): nothing was written. */
export class StoredEventIdError extends Error {
  override name = 'StoredEventIdError';
}

// Named statements (src/db/prepared-statements.ts): parsed and planned once per connection.
// On Citus the call must be the statement's whole FROM, or it is not delegated to the account's
// worker (docs/scale-out.md §4): append_events() checks the state limit itself there. Elsewhere the
// statement checks it, on the text it answers, so that a changed state is written out once
// (migrations/0021).
const APPEND_EVENTS = preparedStatement(
  'append_events',
  `SELECT ${APPEND_ANSWER_SELECT} FROM append_events($1, $2, $3, $4, $5::jsonb, $6::bigint[], $7)`,
);
const APPEND_EVENTS_MEASURED = preparedStatement(
  'append_events_measured',
  `SELECT ${measuredAnswerSelect('$7')} FROM append_events($1, $2, $3, $4, $5::jsonb, $6::bigint[], NULL) AS a ${STATES_AS_TEXT_ONCE}`,
);

/**
 * Appends the events and applies their deltas in one statement; undefined when the session is
 * missing or expired. Throws 412 (If-Match), 413 (a state over the limit) or StoredEventIdError.
 * `notCitus`: the database is known not to be Citus, so the statement may check the state limit
 * (APPEND_EVENTS_MEASURED).
 *
 * Written as SQL text: it runs on every append, and the query builder's compile step cost more CPU
 * than the rest of the call's client side.
 */
export async function appendInDatabase(
  db: Executor,
  key: SessionKey,
  events: EventDocument[],
  ifMatch: number[] | undefined,
  stateLimit: number,
  notCitus = false,
): Promise<AppendedSession | undefined> {
  const parameters = [key.accountId, key.spaceId, key.userId, key.sessionId, JSON.stringify(events), ifMatch ?? null, stateLimit];
  const statement = notCitus ? APPEND_EVENTS_MEASURED : APPEND_EVENTS;
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await db.executeQuery<AppendedSession>(CompiledQuery.raw(statement, parameters));
      return result.rows[0];
    } catch (error) {
      // On Citus a call routed to a shard that a split or move just retired did nothing: sent again
      // it goes by the new metadata. Not inside a transaction, which the error has aborted.
      if (attempt < SHARD_MOVED_ATTEMPTS && !db.isTransaction && isShardMovedAway(error)) {
        await new Promise((resolve) => setTimeout(resolve, SHARD_MOVED_PAUSE_MS * attempt));
        continue;
      }
      throw translated(error, stateLimit);
    }
  }
}

const SHARD_MOVED_ATTEMPTS = 3;
const SHARD_MOVED_PAUSE_MS = 50;

function translated(error: unknown, stateLimit: number): unknown {
  const { code, detail } = error as { code?: string; detail?: string };
  if (violatesUniqueKey(error, CONSTRAINT.eventIdUnique)) return new StoredEventIdError('an eventId of the request is already stored');
  if (code === 'AS412' && detail) return preconditionFailed(Number(detail));
  if (code === 'AS413' && detail) {
    const { scope, stateBytes } = JSON.parse(detail) as { scope: StoredScope; stateBytes: number };
    return stateLimitExceeded(scope, stateBytes, stateLimit);
  }
  if (code === 'AS412' || code === 'AS413') return new AppError('InternalError', 'The append was refused with an unreadable reason.');
  return error;
}

/** What one batch may hold: appends of any accounts, or of one account (Citus delegates it to the account's worker). */
export type BatchScope = 'any-accounts' | 'one-account';

/** A row of the batch functions: an append they wrote, by its 1-based place in the batch. */
export interface BatchRow extends AppendedSession {
  ordinal: number;
}

/** One append of a batch, as the batch functions take it (an element of their JSON array). */
export interface BatchedAppend extends SessionKey {
  events: EventDocument[];
  ifMatch?: number[];
}

const BATCH_COLUMNS = `ordinal, ${APPEND_ANSWER_SELECT}`;
// Never on Citus (`any-accounts`): the statement checks the state limit, as APPEND_EVENTS_MEASURED.
const APPEND_EVENTS_BATCH_WHOLE = preparedStatement(
  'append_events_batch_whole',
  `SELECT a.ordinal, ${measuredAnswerSelect('$2')} FROM append_events_batch_whole($1::jsonb, NULL, $3) AS a ${STATES_AS_TEXT_ONCE}`,
);
const APPEND_EVENTS_BATCH = preparedStatement('append_events_batch', `SELECT ${BATCH_COLUMNS} FROM append_events_batch($1::jsonb, $2, $3)`);
const APPEND_EVENTS_OF_ACCOUNT = preparedStatement('append_events_of_account', `SELECT ${BATCH_COLUMNS} FROM append_events_of_account($1, $2::jsonb, $3, $4)`);

// What append_events_batch_whole() raises when an append of the batch cannot be written: the call
// wrote nothing and its connection is as it was, so the batch goes again append by append. Any
// other failure (a cancelled call, a lost or spoiled connection) is the caller's to judge, as for
// append_events_batch().
const REFUSED_WHOLE = new Set<string>([
  'AS412', // If-Match
  'AS413', // a state over the limit
  'AS422', // an append that writes user: or app: state
  SQLSTATE.uniqueViolation, // an eventId already stored
  SQLSTATE.lockNotAvailable, // a session locked past the lock-wait budget
  SQLSTATE.deadlockDetected,
]);

/** Whether append_events_batch_whole() refused its batch, writing none of it (see REFUSED_WHOLE). */
const refusedWhole = (error: unknown): boolean => REFUSED_WHOLE.has((error as { code?: string }).code ?? '');

/**
 * Sends a batch of appends and answers the rows of those written, by ordinal; the ones left out
 * are run again alone by the caller. Most batches have nothing to refuse: they go as one call of
 * append_events_batch_whole(), all or nothing, without a subtransaction per append. A batch it
 * refuses goes again as append_events_batch(), each append in a subtransaction of its own, with
 * what is left of the lock-wait budget. On Citus (`one-account`: appends of `accountId` only) the
 * batch goes as append_events_of_account(), which Citus delegates whole to the account's worker.
 */
export async function appendBatchInDatabase(
  db: Database,
  { scope, accountId }: { scope: BatchScope; accountId: string },
  appends: BatchedAppend[],
  stateLimit: number,
  lockWaitMs: number,
): Promise<BatchResult> {
  const json = JSON.stringify(appends);
  if (scope === 'one-account') return { rows: await batchRows(db, APPEND_EVENTS_OF_ACCOUNT, [accountId, json, stateLimit, lockWaitMs]), refusedWhole: false };
  const sentAt = performance.now();
  try {
    return { rows: await batchRows(db, APPEND_EVENTS_BATCH_WHOLE, [json, stateLimit, lockWaitMs]), refusedWhole: false };
  } catch (error) {
    if (!refusedWhole(error)) throw error;
  }
  // One lock-wait budget for the batch in all: the whole call may have spent it waiting.
  const lockWaitLeftMs = Math.max(1, Math.ceil(lockWaitMs - (performance.now() - sentAt)));
  return { rows: await batchRows(db, APPEND_EVENTS_BATCH, [json, stateLimit, lockWaitLeftMs]), refusedWhole: true };
}

const batchRows = async (db: Database, statement: string, parameters: unknown[]) => (await db.executeQuery<BatchRow>(CompiledQuery.raw(statement, parameters))).rows;

/** The rows of a batch's appends that were written, and whether the batch was refused whole first. */
export interface BatchResult {
  rows: BatchRow[];
  refusedWhole: boolean;
}

// Failures after which no append of a batch committed, so each may be run again alone: the call was
// cancelled (statement timeout) or ran out of lock time as a whole, or its connection carried a
// transaction someone else began (25P02: aborted; ConnectionStateError: still open, destroyed
// now). A lost connection is not among them: what committed is unknown, as for one append.
const ROLLED_BACK_WHOLE = new Set<string>([SQLSTATE.queryCanceled, SQLSTATE.lockNotAvailable, SQLSTATE.inFailedSqlTransaction]);

/** Whether a batch's call failed without committing any of its appends (on Citus also: routed to a retired shard). */
export const batchRolledBackWhole = (error: unknown): boolean =>
  error instanceof ConnectionStateError || isShardMovedAway(error) || ROLLED_BACK_WHOLE.has((error as { code?: string }).code ?? '');

/**
 * Whether a lone append gave up waiting for its session's row: cancelled by the statement timeout
 * (an append alone has no lock timeout of its own), or past a lock timeout.
 */
export const waitedOutLock = (error: unknown): boolean => {
  const code = (error as { code?: unknown } | undefined)?.code;
  return code === SQLSTATE.queryCanceled || code === SQLSTATE.lockNotAvailable;
};

/** Whether the database is Citus, whose batches must keep to one account. */
export const isCitusDatabase = (db: Database): Promise<boolean> => detectCitus(db);
