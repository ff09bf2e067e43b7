// The append's statement: one call of append_events() (migrations/0004_append_in_database.sql),
// and the database's answers to it turned into the API's (the SQLSTATEs it raises, at this
// boundary).
import { CompiledQuery } from 'kysely';
import type { Executor } from '../../db/connect.js';
import { isShardMovedAway, violatesUniqueKey } from '../../db/errors.js';
import { preparedStatement } from '../../db/prepared-statements.js';
import { CONSTRAINT } from '../../db/sqlstate.js';
import { AppError } from '../../errors.js';
import { preconditionFailed } from '../../lib/preconditions.js';
import type { SessionKey } from '../../db/keys.js';
import { stateLimitExceeded, type StoredScope } from '../state/index.js';
import { APPEND_ANSWER_COLUMNS, type AppendedSession } from './append-answer.js';
import type { EventDocument } from './append-plan.js';

export type { AppendedSession } from './append-answer.js';

/** append_events() found an eventId of the request already stored (unique violation): nothing was written. */
export class StoredEventIdError extends Error {
  override name = 'StoredEventIdError';
}

// A named statement (src/db/prepared-statements.ts): parsed and planned once per connection.
const APPEND_EVENTS = preparedStatement(
  'append_events',
  `SELECT ${APPEND_ANSWER_COLUMNS.join(', ')} FROM append_events($1, $2, $3, $4, $5::jsonb, $6::bigint[], $7)`,
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
