// When to try a request again, and how long to wait first. Pure: the clock and the random source
// come in as arguments, so the unit tests pin every number.
import type { OPERATIONS, OperationId } from './operations.js';

export interface RetryPolicy {
  /** Attempts after the first; 0 turns retrying off. */
  maxRetries: number;
  /** The backoff before the first retry; doubled for each later one. */
  baseDelayMs: number;
  /** No wait is longer, whether it came from the backoff or from Retry-After. */
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { maxRetries: 3, baseDelayMs: 200, maxDelayMs: 20_000 };

/** 429 (rate limited) and 503 (unavailable, or the database is): the server did not do the work. */
export function isRetryableStatus(status: number): boolean {
  return status === 429 || status === 503;
}

/**
 * The wait before retry number `retry` (0 for the first retry): "full jitter", a uniform draw in
 * [0, min(maxDelayMs, baseDelayMs · 2^retry)), so many clients that failed together spread out.
 */
export function backoffDelayMs(retry: number, policy: RetryPolicy, random: () => number = Math.random): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retry);
  return Math.floor(random() * ceiling);
}

/**
 * Retry-After as milliseconds from `nowMs`: delta-seconds ("2") or an HTTP date; undefined when
 * absent or unreadable. A date in the past is 0.
 */
export function parseRetryAfterMs(value: string | null | undefined, nowMs: number): number | undefined {
  if (value === null || value === undefined) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - nowMs);
}

/** The server's Retry-After when it gave one (capped at maxDelayMs), else the jittered backoff. */
export function retryDelayMs(retry: number, policy: RetryPolicy, retryAfterMs: number | undefined, random: () => number = Math.random): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, policy.maxDelayMs);
  return backoffDelayMs(retry, policy, random);
}

/**
 * Whether sending the request again after a network error (the answer may have been lost after the
 * server acted) cannot do the work twice, or report work done as refused: reads, appends (every
 * event carries an eventId by now, and a replay answers 200, If-Match or not), and, unless the call
 * is conditional, PUT/PATCH/DELETE (a second identical one changes nothing more; a DELETE that then
 * answers 404 for what it deletes has succeeded), a createSession that names its sessionId and a
 * createSessionSpace with `onNameExists: reuse`. A conditional write (If-Match, If-None-Match) that
 * did apply would be refused with 412 the second time, so it is not resent: the caller gets the
 * network error and, not knowing whether it applied, reads before deciding. Other POSTs create
 * something new each time. What is not resent here is still retried on 429 and 503, and after a
 * connection that was never made, which say the server did nothing.
 */
export function repeatableAfterLostAnswer(id: OperationId, method: string, body: unknown, conditional: boolean): boolean {
  if (id === 'appendEvents') return true;
  if (conditional) return false;
  if (method !== 'POST') return true;
  if (id === 'createSession') return typeof (body as { sessionId?: unknown } | undefined)?.sessionId === 'string';
  if (id === 'createSessionSpace') return (body as { onNameExists?: unknown } | undefined)?.onNameExists === 'reuse';
  return false;
}

type DeleteOperationId = { [K in OperationId]: (typeof OPERATIONS)[K]['method'] extends 'DELETE' ? K : never }[OperationId];

/** What each DELETE answers when its resource is not there; a new DELETE operation must name its code here. */
const NOT_FOUND_OF_DELETE = {
  deleteSessionSpace: 'ResourceNotFound.SessionSpace',
  deleteSession: 'ResourceNotFound.Session',
  deleteSubAccount: 'ResourceNotFound.SubAccount',
  deleteCredential: 'ResourceNotFound.Credential',
} as const satisfies Record<DeleteOperationId, string>;

/** Whether `code` is the 404 of DELETE operation `id` for its own resource (not, say, of the space it is in). */
export function isNotFoundOfDelete(id: OperationId, code: string): boolean {
  return (NOT_FOUND_OF_DELETE as Partial<Record<OperationId, string>>)[id] === code;
}

/**
 * Whether the request never left: Node's fetch names the cause of a failed connection in
 * `cause.code`, and a refused connection or an unknown host sent nothing, so any request may be
 * resent. Anything else (a reset, a timeout, a closed socket) may have come after the server acted.
 */
export function neverSent(error: unknown): boolean {
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return code === 'ECONNREFUSED' || code === 'ENOTFOUND';
}
