import { describe, expect, it } from 'vitest';
import { YamlValueError, jsonValueOfYaml } from '../../src/modules/transfer/yaml-json.js';

const refusal = (value: unknown): { field: string; rule: string } => {
  try {
    jsonValueOfYaml(value);
  } catch (error) {
    expect(error).toBeInstanceOf(YamlValueError);
    const { field, rule } = error as YamlValueError;
    return { field, rule };
  }
  throw new Error('not refused');
};

describe('jsonValueOfYaml', () => {
  it('turns maps into plain objects and safe BigInts into numbers, keeping order and shared nodes', () => {
    const shared = [1n];
    const value = jsonValueOfYaml(new Map<unknown, unknown>([['b', 2n], [1n, [shared, shared]], [null, true], [false, 'x']]));
    expect(value).toEqual({ '1': [[1], [1]], b: 2, '': true, false: 'x' });
    expect(Object.keys(value as object)).toEqual(['1', 'b', '', 'false']);
    expect(jsonValueOfYaml(BigInt(Number.MAX_SAFE_INTEGER))).toBe(Number.MAX_SAFE_INTEGER);
    expect(jsonValueOfYaml('text')).toBe('text');
  });

  it('keeps a __proto__ key an own property, for the prototype-key check after it', () => {
    const value = jsonValueOfYaml(new Map([['__proto__', new Map([['polluted', 1n]])]])) as Record<string, unknown>;
    expect(Object.getPrototypeOf(value)).toBe(Object.prototype);
    expect(Object.prototype.hasOwnProperty.call(value, '__proto__')).toBe(true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('names the field of what JSON cannot hold', () => {
    expect(refusal(new Map([['a', [1n, new Set([1])]]]))).toMatchObject({ field: 'a[1]', rule: expect.stringContaining('binary data, sets and timestamps') });
    expect(refusal(new Map([['a', new Map([['b', new Uint8Array([1])]])]]))).toMatchObject({ field: 'a.b' });
    expect(refusal([new Date(0)])).toMatchObject({ field: '[0]' });
    expect(refusal(new Set())).toMatchObject({ field: 'body' });
    expect(refusal(new Map([['a', BigInt(Number.MAX_SAFE_INTEGER) + 2n]]))).toMatchObject({ field: 'a', rule: expect.stringContaining('stored as 9007199254740992') });
    expect(jsonValueOfYaml(new Map([['a', 100000000000000000000n]]))).toEqual({ a: 1e20 });
    expect(refusal(new Map([['a', new Map([[[1], 'x']])]]))).toMatchObject({ field: 'a', rule: expect.stringContaining('scalar keys') });
    expect(refusal(new Map<unknown, unknown>([[1n, 'a'], ['1', 'b']]))).toMatchObject({ field: 'body', rule: expect.stringContaining('"1" twice') });
  });

  it('refuses a cycle, naming where it closes, and walks 100,000 levels without recursion', () => {
    const cyclic: unknown[] = [1];
    cyclic.push(new Map([['back', cyclic]]));
    expect(refusal(new Map([['s', cyclic]]))).toMatchObject({ field: 's[1].back', rule: expect.stringContaining('cycle') });
    let deep: unknown = 0n;
    for (let level = 0; level < 100_000; level++) deep = [deep];
    let value = jsonValueOfYaml(deep);
    for (let level = 0; level < 100_000; level++) value = (value as unknown[])[0];
    expect(value).toBe(0);
  });
});
