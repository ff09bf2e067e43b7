// The API 3.0 signatures already accepted, so that a captured request cannot be used again. The
// SDKs sign only `content-type;host`: a captured request could otherwise be sent again, or sent with
// another `X-TC-Action` (docs/tencent-api.md, "Each signature is accepted once").
//
// The rule, per signature: a request of an action that writes takes it for itself (no use before
// it, none after it). The reads (Describe*) and CreateSession, which answers an existing session
// unchanged, may share it, each action once: two bodies that are the same and signed in the same
// second carry the same signature, and a client's get-or-create (DescribeSession, then
// CreateSession with the same key) must not be taken for a replay. An exact repeat is refused
// always, and no signature used by a read can be turned into a delete, a change or an append.
//
// With REDIS_URL the record is kept in Redis, where every instance sees it: one hash per signature,
// checked and written by one script (atomic), so of two instances given the same request at once
// exactly one gets it. The keys sit under REDIS_KEY_PREFIX beside the rate-limit counters. If Redis
// cannot answer, this instance's own record decides (every claim is written there too): a repeat
// through the same instance is still refused, one through another instance is not until Redis is
// back. Refusing every signed request instead would turn a Redis outage into an outage of the API
// 3.0 face, which the rate limit does not do either (rate-limit.ts).
//
// Without Redis the record is this instance's memory, bounded (MEMORY_CAPACITY).
import { createExpiringSet } from '../lib/expiring-set.js';
import type { RateLimitRedis } from './rate-limit.js';

export interface UsedSignatures {
  /**
   * Records that `signature` was used for `action` until `keepUntilSeconds` (Unix seconds). True
   * when the rule above lets this use through; false for a repeat it refuses, recorded before by
   * this instance or (with Redis) by any.
   */
  claim(signature: string, action: string, keepUntilSeconds: number): Promise<boolean>;
}

/** The actions that may share a signature (each once): they read, or create what they would otherwise answer. */
const SHAREABLE_ACTIONS: ReadonlySet<string> = new Set([
  'DescribeSessionSpace',
  'DescribeSessionSpaces',
  'DescribeSession',
  'DescribeSessions',
  'DescribeEvents',
  'CreateSession',
]);

const mayShareSignature = (action: string): boolean => SHAREABLE_ACTIONS.has(action);

// 100,000 entries (a signature takes one, two when shared) of about 70 characters take about 20 MB.
// An instance that accepts more signed requests than that within one window (about 170 a second,
// kept up for 10 minutes) forgets the oldest before its window ends; docs/tencent-api.md says so.
const MEMORY_CAPACITY = 100_000;
const KEY_PART = 'tc3-signature:';

// The hash of a signature holds a field per action that used it; `!` marks a use that took it for
// itself. KEYS[1]: the signature's key; ARGV: the action, '1' when it may share, the seconds to keep.
const CLAIM_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], '!') == 1 then return 0 end
if ARGV[2] == '1' then
  if redis.call('HSETNX', KEYS[1], ARGV[1], '1') == 0 then return 0 end
else
  if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
  redis.call('HSET', KEYS[1], '!', ARGV[1])
end
redis.call('EXPIRE', KEYS[1], ARGV[3])
return 1`;

export function usedSignatures(redis?: RateLimitRedis): UsedSignatures {
  const local = createExpiringSet(MEMORY_CAPACITY);
  /** The rule on this instance's record: `<signature>` marks any use, `<signature>!` one that took it, `<signature>:<action>` a shared use. */
  const claimHere = (signature: string, action: string, expiresAtMs: number, nowMs: number): boolean => {
    if (local.has(`${signature}!`, nowMs)) return false;
    if (!mayShareSignature(action)) {
      if (!local.addIfAbsent(signature, expiresAtMs, nowMs)) return false;
      local.addIfAbsent(`${signature}!`, expiresAtMs, nowMs);
      return true;
    }
    if (!local.addIfAbsent(`${signature}:${action}`, expiresAtMs, nowMs)) return false;
    local.addIfAbsent(signature, expiresAtMs, nowMs);
    return true;
  };
  return {
    async claim(signature, action, keepUntilSeconds) {
      const nowMs = Date.now();
      const allowedHere = claimHere(signature, action, keepUntilSeconds * 1000, nowMs);
      if (!allowedHere || !redis) return allowedHere;
      const seconds = Math.max(1, keepUntilSeconds - Math.floor(nowMs / 1000));
      try {
        const claimed = await redis.client.eval(CLAIM_SCRIPT, 1, `${redis.keyPrefix}${KEY_PART}${signature}`, action, mayShareSignature(action) ? '1' : '0', seconds);
        return claimed === 1;
      } catch {
        // Redis is away (its client logs that once, rate-limit.ts): this instance's record decides.
        return true;
      }
    },
  };
}
