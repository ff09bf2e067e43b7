import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { chooseBatch, type Weighed } from '../../src/modules/events/batch-choice.js';

const MB = 1024 * 1024;
/** `a1` is account a's first append; the number after the account names it, and `bytes` weighs it. */
const append = (name: string, bytes = 0): Weighed<string> => ({ item: name, accountId: name[0]!, bytes });

describe('chooseBatch', () => {
  it('takes the accounts in turns, in the order their oldest append arrived', () => {
    const waiting = ['a1', 'a2', 'a3', 'a4', 'b1', 'a5', 'c1', 'b2'].map((name) => append(name));
    expect(chooseBatch(waiting, 5, 4 * MB)).toEqual({ batch: ['a1', 'a2', 'b1', 'c1', 'b2'], rest: ['a3', 'a4', 'a5'] });
    expect(chooseBatch(waiting, 100, 4 * MB).batch).toEqual(['a1', 'a2', 'a3', 'a4', 'b1', 'a5', 'c1', 'b2']);
  });

  it('stops at the expected answer bytes, always taking the first; an account that does not fit ends its turns', () => {
    const waiting = [append('a1', 1.5 * MB), append('a2', 1.5 * MB), append('a3', 1.5 * MB), append('b1', 100), append('c1', 3 * MB), append('b2', 100)];
    // a1, b1, c1 (too big: c's turns end), b1's next b2, a2, then a3 is past 4 MB.
    expect(chooseBatch(waiting, 32, 4 * MB)).toEqual({ batch: ['a1', 'a2', 'b1', 'b2'], rest: ['a3', 'c1'] });
    expect(chooseBatch([append('a1', 9 * MB), append('b1')], 32, 4 * MB)).toEqual({ batch: ['a1'], rest: ['b1'] });
    expect(chooseBatch([append('a1', 9 * MB), append('a2')], 32, 4 * MB)).toEqual({ batch: ['a1'], rest: ['a2'] });
  });

  it('leaves the appends that are not eligible waiting, in their order, whatever their account\'s turn', () => {
    const waiting = [append('a1', MB), append('b1'), { ...append('a2'), eligible: false }, append('a3', MB), { ...append('c1'), eligible: false }];
    expect(chooseBatch(waiting, 32, 4 * MB)).toEqual({ batch: ['a1', 'b1', 'a3'], rest: ['a2', 'c1'] });
  });

  it('takes one account only when asked (Citus)', () => {
    const waiting = ['a1', 'b1', 'a2', 'b2'].map((name) => append(name));
    expect(chooseBatch(waiting, 32, 4 * MB, 'b')).toEqual({ batch: ['b1', 'b2'], rest: ['a1', 'a2'] });
  });

  it('keeps each account\'s order, takes at least one, at most maxBatch, and loses nothing', () => {
    const entry = fc.record({ accountId: fc.constantFrom('a', 'b', 'c'), bytes: fc.constantFrom(0, 100, MB, 3 * MB, 5 * MB) });
    fc.assert(
      fc.property(fc.array(entry, { minLength: 1, maxLength: 40 }), fc.integer({ min: 1, max: 32 }), (entries, maxBatch) => {
        const waiting = entries.map((fields, index) => ({ ...fields, item: index }));
        const { batch, rest } = chooseBatch(waiting, maxBatch, 4 * MB);
        expect([...batch, ...rest].sort((x, y) => x - y)).toEqual(waiting.map((_, index) => index));
        expect(batch.length).toBeGreaterThanOrEqual(1);
        expect(batch.length).toBeLessThanOrEqual(maxBatch);
        if (batch.length > 1) expect(batch.reduce((sum, index) => sum + waiting[index]!.bytes, 0)).toBeLessThanOrEqual(4 * MB);
        // Nothing of an account goes ahead of an earlier append of it that stays.
        for (const taken of batch) {
          for (const left of rest) if (waiting[left]!.accountId === waiting[taken]!.accountId) expect(left).toBeGreaterThan(taken);
        }
      }),
    );
  });
});
