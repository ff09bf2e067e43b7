import { describe, expect, it } from 'vitest';
import { jsonBytes, jsonDepth } from '../../src/lib/json-measure.js';
import { applyStateDelta } from '../../src/modules/state/state-delta.js';

describe('applyStateDelta', () => {
  const state = { keep: 1, profile: { name: 'Ada', lang: 'en' }, tags: ['a'], gone: true };

  it('defaults to merge-patch: nested objects merge, null deletes, arrays replace', () => {
    const next = applyStateDelta(state, { profile: { lang: 'fr' }, tags: ['b'], gone: null, added: 'x' });
    expect(next).toEqual({ keep: 1, profile: { name: 'Ada', lang: 'fr' }, tags: ['b'], added: 'x' });
    expect(applyStateDelta(state, { gone: null }, 'merge-patch')).not.toHaveProperty('gone');
  });

  it('replace mode replaces top-level keys whole and stores null as a value', () => {
    const next = applyStateDelta(state, { profile: { lang: 'fr' }, gone: null }, 'replace');
    expect(next).toEqual({ keep: 1, profile: { lang: 'fr' }, tags: ['a'], gone: null });
    expect(next).toHaveProperty('gone', null);
  });

  it('does not mutate the state or the delta', () => {
    const before = structuredClone(state);
    const delta = { profile: { lang: 'fr' } };
    applyStateDelta(state, delta);
    applyStateDelta(state, delta, 'replace');
    expect(state).toEqual(before);
    expect(delta).toEqual({ profile: { lang: 'fr' } });
  });
});

describe('jsonDepth', () => {
  it('counts nested containers: scalars 0, {} and [] 1', () => {
    expect(jsonDepth(1)).toBe(0);
    expect(jsonDepth(null)).toBe(0);
    expect(jsonDepth({})).toBe(1);
    expect(jsonDepth([])).toBe(1);
    expect(jsonDepth({ a: 1, b: { c: [1, { d: 2 }] } })).toBe(4);
    expect(jsonDepth({ a: { b: 1 }, c: { d: { e: { f: 1 } } } })).toBe(4);
  });

  it('measures values far deeper than the call stack allows', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = { a: deep };
    expect(jsonDepth(deep)).toBe(100_000);
  });
});

describe('jsonBytes', () => {
  it('is the UTF-8 size of the compact JSON text', () => {
    expect(jsonBytes({ a: 1 })).toBe(7);
    expect(jsonBytes({ a: 'é' })).toBe('{"a":"é"}'.length + 1);
  });
});
