// Why PostgreSQL could not be used at start-up, in one line an operator acts on: the host and port
// (or database, or user) that failed, and the variable to change. The URL's password is never part
// of it: the line is built from the URL's other parts, and pg's own messages do not carry it.

import type { DatabaseOptions } from './connect.js';

/** Which connection failed: the variable it comes from, and its URL. */
export interface DatabaseTarget {
  variable: 'DATABASE_URL' | 'DATABASE_DIRECT_URL';
  url: string;
}

/** The connection migrations use (the direct one behind a pooler) and the pool's; none for the embedded database. */
export function databaseTargets(options: DatabaseOptions): { direct: DatabaseTarget; pooled: DatabaseTarget } | undefined {
  if (options.kind !== 'postgres') return undefined;
  const pooled: DatabaseTarget = { variable: 'DATABASE_URL', url: options.url };
  return { direct: options.directUrl ? { variable: 'DATABASE_DIRECT_URL', url: options.directUrl } : pooled, pooled };
}

/** One line naming what is wrong with `target`, or undefined when `error` is not about reaching the database. */
export function describeDatabaseFailure(error: unknown, target: DatabaseTarget): string | undefined {
  const { host, port, database, user } = partsOf(target.url);
  const where = `PostgreSQL at ${host}:${port}`;
  const check = `check ${target.variable}`;
  const code = errorCode(error);
  switch (code) {
    case 'ECONNREFUSED':
      return `Cannot reach ${where} (connection refused): ${check}, or start PostgreSQL.`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `Cannot reach ${where} (the host name ${host} does not resolve): ${check}.`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `Cannot reach ${where} (no route to the host): ${check}.`;
    case 'ETIMEDOUT':
      return `Cannot reach ${where} (timed out): ${check}, or raise DB_CONNECT_TIMEOUT_MS.`;
    case '28P01': // invalid_password
      return `${where} refused the password of user "${user}": ${check}.`;
    case '28000': // invalid_authorization_specification: unknown role, no pg_hba.conf entry
      return `${where} refused user "${user}" (${firstLine(error)}): ${check}.`;
    case '3D000': // invalid_catalog_name
      return `${where} has no database "${database}": create it, or ${check}.`;
    default:
      break;
  }
  const message = error instanceof Error ? error.message : '';
  // pg-pool's connectionTimeoutMillis, and pg's own connect timeout (a server that accepts but never answers).
  if (/timeout exceeded when trying to connect|connection timeout/i.test(message)) {
    return `Cannot reach ${where} (no answer within DB_CONNECT_TIMEOUT_MS): ${check}, or raise DB_CONNECT_TIMEOUT_MS.`;
  }
  if (/Connection terminated unexpectedly|ECONNRESET/.test(message) || code === 'ECONNRESET') {
    return `${where} closed the connection while it was being set up (is it PostgreSQL, and does its SSL setting match?): ${check}.`;
  }
  return undefined;
}

/** The code of `error`, or of the first inner error that has one (a host with several addresses fails with an AggregateError). */
function errorCode(error: unknown, depth = 0): string | undefined {
  if (!(error instanceof Error) || depth > 3) return undefined;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') return code;
  if (error instanceof AggregateError) {
    for (const inner of error.errors) {
      const found = errorCode(inner, depth + 1);
      if (found) return found;
    }
  }
  return errorCode(error.cause, depth + 1);
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!;
}

function partsOf(url: string): { host: string; port: string; database: string; user: string } {
  const parsed = new URL(url);
  // pg's defaults for the parts a URL may leave out.
  return {
    host: parsed.hostname || 'localhost',
    port: parsed.port || '5432',
    database: decodeURIComponent(parsed.pathname.slice(1)) || decodeURIComponent(parsed.username) || 'postgres',
    user: decodeURIComponent(parsed.username) || 'postgres',
  };
}

/** `text` with the password of each URL removed, for messages that are not ours (the fallback line). */
export function withoutPasswords(text: string, urls: readonly (string | undefined)[]): string {
  let result = text;
  for (const url of urls) {
    if (!url) continue;
    const { password } = new URL(url);
    if (!password) continue;
    for (const form of new Set([password, decodeURIComponent(password)])) result = result.split(form).join('***');
  }
  return result;
}
