// The append's statements: one call of append_events() (migrations/0004_append_in_database.sql),
// the group commit's call of append_events_batch() or, on Citus, append_events_of_account()
// (migrations 0007, 0011), and the database's answers to them turned into the API's (the SQLSTATEs
// they raise, at this boundary).
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
import { APPEND_ANSWER_SELECT, type AppendedSession } from './append-answer.js';
import type { EventDocument } from './append-plan.js';

export type { AppendedSession } from './append-answer.js';

/** append_events() found an eventId of the request already stored (unique violation): nothing was written. */
export class StoredEventIdError extends Error {
  override name = 'StoredEventIdError';
}

// A named statement (src/db/prepared-statements.ts): parsed and planned once per connection.
const APPEND_EVENTS = preparedStatement(
  'append_events',
  `SELECT ${APPEND_ANSWER_SELECT} FROM append_events($1, $2, $3, $4, $5::jsonb, $6::bigint[], $7)`,
);

/**
 * Appends the events and applies their deltas in one statement; undefined when the session is
 * missing or expired. Throws 412 (If-Match), 413 (a state over the limit) or StoredEventIdError.
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
): Promise<AppendedSession | undefined> {
  const parameters = [key.accountId, key.spaceId, key.userId, key.sessionId, JSON.stringify(events), ifMatch ?? null, stateLimit];
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await db.executeQuery<AppendedSession>(CompiledQuery.raw(APPEND_EVENTS, parameters));
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
const APPEND_EVENTS_BATCH = preparedStatement('append_events_batch', `SELECT ${BATCH_COLUMNS} FROM append_events_batch($1::jsonb, $2, $3)`);
const APPEND_EVENTS_OF_ACCOUNT = preparedStatement('append_events_of_account', `SELECT ${BATCH_COLUMNS} FROM append_events_of_account($1, $2::jsonb, $3, $4)`);

/**
 * Sends a batch of appends as one call: each in a subtransaction of its own, the ones it could not
 * write left out of the rows (they are run again alone). `one-account` batches hold appends of
 * `accountId` only.
 */
export async function appendBatchInDatabase(
  db: Database,
  { scope, accountId }: { scope: BatchScope; accountId: string },
  appends: BatchedAppend[],
  stateLimit: number,
  lockWaitMs: number,
): Promise<BatchRow[]> {
  const query =
    scope === 'one-account'
      ? CompiledQuery.raw(APPEND_EVENTS_OF_ACCOUNT, [accountId, JSON.stringify(appends), stateLimit, lockWaitMs])
      : CompiledQuery.raw(APPEND_EVENTS_BATCH, [JSON.stringify(appends), stateLimit, lockWaitMs]);
  return (await db.executeQuery<BatchRow>(query)).rows;
}

// Failures after which no append of a batch committed, so each may be run again alone: the call was
// cancelled (statement timeout) or ran out of lock time as a whole, or its connection carried a
// transaction someone else began (25P02: aborted; ConnectionStateError: still open, destroyed
// now). A lost connection is not among them: what committed is unknown, as for one append.
const ROLLED_BACK_WHOLE = new Set<string>([SQLSTATE.queryCanceled, SQLSTATE.lockNotAvailable, SQLSTATE.inFailedSqlTransaction]);

/** Whether a batch's call failed without committing any of its appends (on Citus also: routed to a retired shard). */
export const batchRolledBackWhole = (error: unknown): boolean =>
  error instanceof ConnectionStateError || isShardMovedAway(error) || ROLLED_BACK_WHOLE.has((error as { code?: string }).code ?? '');

/** Whether the database is Citus, whose batches must keep to one account. */
export const isCitusDatabase = (db: Database): Promise<boolean> => detectCitus(db);
