// Database failures that mean "not available right now" rather than "this request is wrong".
import type { TaskLogger } from '../lib/periodic-task.js';
import { PoolCheckoutTimeout } from './fair-pool.js';
import { ConnectionStateError } from './guarded-pool.js';
import { SQLSTATE } from './sqlstate.js';

const UNAVAILABLE_SQLSTATES = new Set<string>([
  SQLSTATE.adminShutdown,
  SQLSTATE.crashShutdown,
  SQLSTATE.cannotConnectNow, // starting up, shutting down, in recovery
  SQLSTATE.tooManyConnections,
  // The server is short of disk or memory: nothing is wrong with the request, try again later.
  SQLSTATE.insufficientResources,
  SQLSTATE.diskFull,
  SQLSTATE.outOfMemory,
  // A read-only database (a hot standby, or a primary demoted by a failover whose connections the
  // pool still holds, or default_transaction_read_only): writes wait for a writable primary.
  SQLSTATE.readOnlySqlTransaction,
  SQLSTATE.lockNotAvailable, // lock_timeout
  SQLSTATE.queryCanceled, // statement_timeout
  SQLSTATE.idleInTransactionSessionTimeout,
  SQLSTATE.inFailedSqlTransaction, // a connection left inside an aborted transaction (guarded-pool.ts destroys it)
  // The database rolled the transaction back to break a deadlock or a serialization conflict: run
  // again, it succeeds. On one PostgreSQL the service's lock order leaves none; on Citus a
  // distributed deadlock (locks on several nodes' copies of a reference table) is broken this way.
  SQLSTATE.deadlockDetected,
  SQLSTATE.serializationFailure,
]);
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN', 'ENOENT', 'EHOSTUNREACH', 'ENETUNREACH']);

// The messages pg, pg-pool and Kysely give errors that carry no code, each seen when the server
// goes away or cannot be reached: the pool's connect timeout; a socket closed under a query or a
// transaction; a client already marked broken (or closed by shutdown) asked for another statement,
// which is what Kysely's ROLLBACK after a lost connection meets; pg's client-side query_timeout;
// Kysely's pool after destroy.
const UNAVAILABLE_MESSAGES =
  /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|is not queryable|Query read timeout|Postgres connection has been discarded|driver has already been destroyed|connect ECONNREFUSED/i;

/**
 * Citus: the statement was routed to a shard that a shard split or move (isolate_tenant_to_new_shard,
 * citus_move_shard_placement) retired while it was on its way. Nothing of it ran; sent again, it is
 * routed by the new metadata. Citus raises these as internal errors (XX000), by message.
 */
const SHARD_MOVED_AWAY = /could not find valid entry for shard|shard \d+ does not exist|could not find (any )?shard placement/i;

export function isShardMovedAway(error: unknown): boolean {
  return error instanceof Error && SHARD_MOVED_AWAY.test(error.message);
}

export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 3) return false;
  if (error instanceof ConnectionStateError || error instanceof PoolCheckoutTimeout || isShardMovedAway(error)) return true;
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  // FATAL ends the database session: refused at connect (not accepting connections, too many,
  // authentication) or terminated. Whatever the code, the request can only be retried.
  if (severity === 'FATAL' || severity === 'PANIC') return true;
  if (typeof code === 'string') {
    if (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_NODE_CODES.has(code)) return true;
  }
  if (UNAVAILABLE_MESSAGES.test(error.message)) return true;
  // A host with several addresses fails with an AggregateError of one error per address.
  if (error instanceof AggregateError && error.errors.some((inner) => isDatabaseUnavailable(inner, depth + 1))) return true;
  return error.cause !== undefined && isDatabaseUnavailable(error.cause, depth + 1);
}

/**
 * A background task's failed run (`what`: "expiry sweep", …). While the database is unavailable the
 * request path logs the outage once, when it starts and when it ends (http/database-outage.ts); a
 * task that runs into it says so at debug, without a stack, and tries again at its next run. Any
 * other failure is an error with its stack.
 */
export function logTaskFailure(logger: TaskLogger, err: unknown, what: string): void {
  if (isDatabaseUnavailable(err)) logger.debug({ reason: (err as Error).message }, `${what} skipped: the database is unavailable`);
  else logger.error({ err }, `${what} failed`);
}

/** A unique key, as the migrations declare it. */
export interface UniqueKey {
  constraint: string;
  columns: readonly string[];
}

/**
 * Whether `error` is a unique violation (23505) of `key`. On one PostgreSQL the error names the
 * constraint. On Citus it comes from a shard, whose constraint names are the table's shortened,
 * hashed and suffixed with the shard id (`events_account_id_space_id_user_id_session_id_e_53204c41_102129`),
 * so there the key is recognised by its columns, which the error's detail lists:
 * `Key (account_id, …, event_id)=(…) already exists.`
 */
export function violatesUniqueKey(error: unknown, key: UniqueKey): boolean {
  const { code, constraint, detail } = error as { code?: unknown; constraint?: unknown; detail?: unknown };
  if (code !== SQLSTATE.uniqueViolation) return false;
  if (constraint === key.constraint) return true;
  return typeof detail === 'string' && detail.startsWith(`Key (${key.columns.join(', ')})=`);
}
