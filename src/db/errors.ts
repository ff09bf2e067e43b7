// Database failures that mean "not available right now" rather than "this request is wrong".
const UNAVAILABLE_SQLSTATES = new Set([
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '53300', // too_many_connections
  '55P03', // lock_not_available (lock_timeout)
  '57014', // query_canceled (statement_timeout)
]);
const UNAVAILABLE_NODE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EPIPE', 'EAI_AGAIN', 'ENOENT']);

export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (code.startsWith('08') || UNAVAILABLE_SQLSTATES.has(code) || UNAVAILABLE_NODE_CODES.has(code)) return true;
  }
  // pg's own messages for a pool that cannot connect or a connection that went away.
  return /timeout exceeded when trying to connect|Connection terminated|Client has encountered a connection error|connect ECONNREFUSED/i.test(error.message);
}

export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const e = error as { code?: unknown; constraint?: unknown };
  return e?.code === '23505' && (constraint === undefined || e.constraint === constraint);
}
