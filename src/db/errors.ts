// Database failures that mean "not available right now" rather than "this request is wrong".
import { PoolCheckoutTimeout } from './fair-pool.js';
import { ConnectionStateError } from './guarded-pool.js';
import { SQLSTATE } from './sqlstate.js';

const UNAVAILABLE_SQLSTATES = new Set<string>([
  SQLSTATE.adminShutdown,
  SQLSTATE.crashShutdown,
  SQLSTATE.cannotConnectNow, // starting up, shutting down, in recovery
  SQLSTATE.tooManyConnections,
  SQLSTATE.lockNotAvailable, // lock_timeout
  SQLSTATE.queryCanceled, // statement_timeout
  SQLSTATE.idleInTransactionSessionTimeout,
  SQLSTATE.inFailedSqlTransaction, // a connection left inside an aborted transaction (guarded-pool.ts destroys it)
]);
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN', 'ENOENT', 'EHOSTUNREACH', 'ENETUNREACH']);

// The messages pg, pg-pool and Kysely give errors that carry no code, each seen when the server
// goes away or cannot be reached: the pool's connect timeout; a socket closed under a query or a
// transaction; a client already marked broken (or closed by shutdown) asked for another statement,
// which is what Kysely's ROLLBACK after a lost connection meets; pg's client-side query_timeout;
// Kysely's pool after destroy.
const UNAVAILABLE_MESSAGES =
  /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|is not queryable|Query read timeout|Postgres connection has been discarded|driver has already been destroyed|connect ECONNREFUSED/i;

export function isDatabaseUnavailable(error: unknown, depth = 0): boolean {
  if (!(error instanceof Error) || depth > 3) return false;
  if (error instanceof ConnectionStateError || error instanceof PoolCheckoutTimeout) return true;
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
