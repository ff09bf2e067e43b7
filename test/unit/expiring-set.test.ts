import { describe, expect, it } from 'vitest';
import { createExpiringSet } from '../../src/lib/expiring-set.js';

describe('createExpiringSet', () => {
  it('adds a key once until it expires, then again', () => {
    const set = createExpiringSet(10);
    expect(set.addIfAbsent('a', 1_000, 0)).toBe(true);
    expect(set.addIfAbsent('a', 5_000, 500)).toBe(false);
    expect(set.addIfAbsent('a', 5_000, 999)).toBe(false);
    // At its expiry the key is free again.
    expect(set.addIfAbsent('a', 2_000, 1_000)).toBe(true);
    expect(set.addIfAbsent('a', 3_000, 1_500)).toBe(false);
    expect(set.addIfAbsent('b', 2_000, 1_500)).toBe(true);
  });

  it('tells whether a key is held, without adding it', () => {
    const set = createExpiringSet(10);
    expect(set.has('a', 0)).toBe(false);
    expect(set.size).toBe(0);
    set.addIfAbsent('a', 1_000, 0);
    expect(set.has('a', 999)).toBe(true);
    expect(set.has('a', 1_000)).toBe(false);
  });

  it('holds at most its capacity, forgetting the key added longest ago', () => {
    const set = createExpiringSet(3);
    for (const key of ['a', 'b', 'c', 'd']) expect(set.addIfAbsent(key, 10_000, 0)).toBe(true);
    expect(set.size).toBe(3);
    expect(set.addIfAbsent('a', 10_000, 1)).toBe(true); // forgotten: 'd' pushed it out
    expect(set.addIfAbsent('c', 10_000, 1)).toBe(false);
    expect(set.addIfAbsent('d', 10_000, 1)).toBe(false);
    expect(set.size).toBe(3);
  });

  it('drops expired keys in its sweep, so they do not take room', () => {
    const set = createExpiringSet(1_000, 100);
    for (let i = 0; i < 500; i++) set.addIfAbsent(`old-${i}`, 50, 0);
    expect(set.size).toBe(500);
    set.addIfAbsent('new', 10_000, 100);
    expect(set.size).toBe(1);
  });

  it('refuses a capacity below one', () => {
    expect(() => createExpiringSet(0)).toThrow(/at least 1/);
  });
});
