// Server-generated ids: RFC 9562 UUIDv7 (the time first, version 7, the RFC variant, 74 random bits).
import { describe, expect, it } from 'vitest';
import { uuidv7 } from '../../src/lib/ids.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const millisOf = (id: string) => Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);
/** rand_a and rand_b as 19 hex digits: the fourth (index 3) also holds the variant's two bits. */
const randomPart = (id: string) => id.slice(15, 18) + id.slice(19, 23) + id.slice(24);

describe('uuidv7', () => {
  it('has version 7, the RFC variant and the time it was made, to the millisecond', () => {
    for (let i = 0; i < 1_000; i++) {
      const before = Date.now();
      const id = uuidv7();
      const after = Date.now();
      expect(id).toMatch(V7);
      expect(millisOf(id)).toBeGreaterThanOrEqual(before);
      expect(millisOf(id)).toBeLessThanOrEqual(after);
    }
  });

  it('sorts by creation across milliseconds, as text', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      ids.push(uuidv7());
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    expect([...ids].sort()).toEqual(ids);
  });

  it('is unique and its random bits vary: 100,000 ids, every hex digit of the random part takes every value', () => {
    const ids = Array.from({ length: 100_000 }, uuidv7);
    expect(new Set(ids).size).toBe(ids.length);
    const parts = ids.map(randomPart);
    // Index 3 carries the variant (8–b: four values); every other digit is random, all 16 values.
    for (let position = 0; position < 19; position++) {
      const seen = new Set(parts.map((part) => part[position]));
      expect(seen.size, `random hex digit ${position}`).toBe(position === 3 ? 4 : 16);
    }
  });
});
