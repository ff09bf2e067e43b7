// The API 3.0 signatures already accepted, so that each is accepted once. The SDKs sign only
// `content-type;host`: a captured request could otherwise be sent again, or sent with another
// `X-TC-Action` (docs/tencent-api.md, "Each signature is accepted once").
//
// With REDIS_URL they are kept in Redis, where every instance sees them: one `SET NX EX` per
// request, so of two instances given the same signature at once exactly one gets it. The keys sit
// under REDIS_KEY_PREFIX beside the rate-limit counters. If Redis cannot answer, this instance's
// own record decides (every signature is written there too): a repeat through the same instance is
// still refused, one through another instance is not until Redis is back. Refusing every signed
// request instead would turn a Redis outage into an outage of the API 3.0 face, which the rate
// limit does not do either (rate-limit.ts).
//
// Without Redis the record is this instance's memory, bounded (MEMORY_CAPACITY).
import { createExpiringSet } from '../lib/expiring-set.js';
import type { RateLimitRedis } from './rate-limit.js';

export interface UsedSignatures {
  /**
   * Records `signature` as used until `keepUntilSeconds` (Unix seconds). True the first time;
   * false when it was recorded before, by this instance or (with Redis) by any.
   */
  claim(signature: string, keepUntilSeconds: number): Promise<boolean>;
}

// 100,000 signatures of 64 hex characters take about 20 MB. An instance that accepts more signed
// requests than that within one window (about 170 a second, kept up for 10 minutes) forgets the
// oldest before its window ends; docs/tencent-api.md says so.
const MEMORY_CAPACITY = 100_000;
const KEY_PART = 'tc3-signature:';

export function usedSignatures(redis?: RateLimitRedis): UsedSignatures {
  const local = createExpiringSet(MEMORY_CAPACITY);
  return {
    async claim(signature, keepUntilSeconds) {
      const nowMs = Date.now();
      const firstHere = local.addIfAbsent(signature, keepUntilSeconds * 1000, nowMs);
      if (!firstHere || !redis) return firstHere;
      const seconds = Math.max(1, keepUntilSeconds - Math.floor(nowMs / 1000));
      try {
        return (await redis.client.set(`${redis.keyPrefix}${KEY_PART}${signature}`, '1', 'EX', seconds, 'NX')) === 'OK';
      } catch {
        // Redis is away (its client logs that once, rate-limit.ts): this instance's record decides.
        return true;
      }
    },
  };
}
