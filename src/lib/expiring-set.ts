// A set of strings, each kept until its own expiry, holding at most `capacity` of them. Pure (the
// caller passes the time): the used API 3.0 signatures of an instance without Redis live in one.
//
// Full, it forgets the entry added longest ago, whatever its expiry: memory stays bounded, and what
// is lost is the oldest entry, the one whose request is least likely to be replayed still.
// Expired entries are dropped by a sweep at most once per `sweepEveryMs`, so a hot path pays O(1)
// per add and the occasional O(size) sweep is spread over at least that many milliseconds.

export interface ExpiringSet {
  /**
   * Adds `key` until `expiresAtMs`, answering true; answers false and changes nothing when `key`
   * is already held and unexpired. The check and the add are one synchronous step: two callers
   * cannot both get true for one key.
   */
  addIfAbsent(key: string, expiresAtMs: number, nowMs: number): boolean;
  /** Whether `key` is held and unexpired at `nowMs`. */
  has(key: string, nowMs: number): boolean;
  /** Entries held now, expired ones not yet swept included. */
  readonly size: number;
}

export function createExpiringSet(capacity: number, sweepEveryMs = 10_000): ExpiringSet {
  if (!Number.isInteger(capacity) || capacity < 1) throw new Error(`an expiring set needs a capacity of at least 1, not ${capacity}`);
  // A Map iterates in insertion order: its first key is the one added longest ago.
  const expiries = new Map<string, number>();
  let nextSweepMs = 0;

  const sweep = (nowMs: number) => {
    for (const [key, expiresAtMs] of expiries) if (expiresAtMs <= nowMs) expiries.delete(key);
    nextSweepMs = nowMs + sweepEveryMs;
  };

  return {
    addIfAbsent(key, expiresAtMs, nowMs) {
      const held = expiries.get(key);
      if (held !== undefined && held > nowMs) return false;
      if (nowMs >= nextSweepMs) sweep(nowMs);
      // Re-adding an expired key moves it to the end, where a fresh entry belongs.
      expiries.delete(key);
      if (expiries.size >= capacity) expiries.delete(expiries.keys().next().value!);
      expiries.set(key, expiresAtMs);
      return true;
    },
    has(key, nowMs) {
      const held = expiries.get(key);
      return held !== undefined && held > nowMs;
    },
    get size() {
      return expiries.size;
    },
  };
}
