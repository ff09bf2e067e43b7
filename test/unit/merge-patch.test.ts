import { describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/db/schema.js';
import { applyMergePatch } from '../../src/modules/state/merge-patch.js';

// RFC 7396, Appendix A: every example, in the RFC's order.
const APPENDIX_A: [original: JsonValue, patch: JsonValue, result: JsonValue][] = [
  [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
  [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
  [{ a: 'b' }, { a: null }, {}],
  [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
  [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
  [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
  [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
  [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
  [['a', 'b'], ['c', 'd'], ['c', 'd']],
  [{ a: 'b' }, ['c'], ['c']],
  [{ a: 'foo' }, null, null],
  [{ a: 'foo' }, 'bar', 'bar'],
  [{ e: null }, { a: 1 }, { e: null, a: 1 }],
  [[1, 2], { a: 'b', c: null }, { a: 'b' }],
  [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
];

describe('applyMergePatch (RFC 7396)', () => {
  it('has all 15 examples of Appendix A', () => {
    expect(APPENDIX_A).toHaveLength(15);
  });

  it.each(APPENDIX_A.map(([original, patch, result], index) => ({ n: index + 1, original, patch, result })))(
    'Appendix A example $n: $original + $patch',
    ({ original, patch, result }) => {
      expect(applyMergePatch(original, patch)).toEqual(result);
    },
  );

  it('never mutates the target or the patch', () => {
    const target = { a: { b: 1, c: 2 }, d: [1] };
    const patch = { a: { b: null, e: { f: 1 } }, d: null };
    const before = structuredClone({ target, patch });
    applyMergePatch(target, patch);
    expect({ target, patch }).toEqual(before);
  });
});
