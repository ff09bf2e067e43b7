// When to try a request again, and how long to wait first. Pure: the clock and the random source
// come in as arguments, so the unit tests pin every number.

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
