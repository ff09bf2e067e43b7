import { describe, expect, it } from 'vitest';
import { diffJson, jsonEqual } from '../../src/lib/json-diff.js';

describe('diffJson', () => {
  it('names added, removed and changed values by their key path, recursing into objects', () => {
    const before = { keep: 1, gone: 'x', nested: { a: 1, b: { c: true } }, list: [1, 2] };
    const after = { keep: 1, nested: { a: 2, b: { c: true }, d: null }, list: [1, 2, 3], fresh: { z: 1 } };
    expect(diffJson(before, after)).toEqual([
      { path: ['gone'], kind: 'removed', before: 'x' },
      { path: ['nested', 'a'], kind: 'changed', before: 1, after: 2 },
      { path: ['nested', 'd'], kind: 'added', after: null },
      { path: ['list'], kind: 'changed', before: [1, 2], after: [1, 2, 3] },
      { path: ['fresh'], kind: 'added', after: { z: 1 } },
    ]);
  });

  it('treats a value that changes type as replaced whole, and equal states as no change', () => {
    expect(diffJson({ a: { b: 1 } }, { a: [1] })).toEqual([{ path: ['a'], kind: 'changed', before: { b: 1 }, after: [1] }]);
    expect(diffJson({ a: { x: 1, y: [1, { z: 2 }] } }, { a: { y: [1, { z: 2 }], x: 1 } })).toEqual([]);
  });
});

describe('jsonEqual', () => {
  it('ignores key order, not array order', () => {
    expect(jsonEqual({ a: 1, b: 2 }, { b: 2, a: 1 })).toBe(true);
    expect(jsonEqual([1, 2], [2, 1])).toBe(false);
    expect(jsonEqual(null, {})).toBe(false);
    expect(jsonEqual({ a: 1 }, { a: 1, b: undefined as unknown as null })).toBe(false);
  });
});
