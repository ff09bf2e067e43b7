import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compactJsonLength, holdsNonFiniteNumber } from '../../src/lib/json-measure.js';

/** What the context window measured before: JSON.stringify of the parsed value. */
const stringifiedLength = (text: string) => JSON.stringify(JSON.parse(text)).length;

/** A value written the way jsonb writes it: `{"a": 1, "b": [1, 2]}`. */
function jsonbStyle(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(jsonbStyle).join(', ')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value).map(([key, item]) => `${JSON.stringify(key)}: ${jsonbStyle(item)}`).join(', ')}}`;
  }
  return JSON.stringify(value);
}

// Strings of characters PostgreSQL can store (no NUL, no lone surrogates), with escapes and astral characters.
const storableText = fc.string({ unit: fc.constantFrom('a', 'é', '"', '\\', '\n', '\t', '\u0001', '\u001f', '\u2028', '😀', '中', ' ', ',', ':', '{', ']', '1') });
const storableJson = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    storableText,
    fc.double({ noNaN: true, noDefaultInfinity: true }),
    fc.integer(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(storableText, tie('value'), { maxKeys: 4 }),
  ),
})).value;

describe('compactJsonLength', () => {
  it.each([
    ['compact text', '{"a":1,"b":[true,false,null]}'],
    ['jsonb spacing', '{"a": 1, "b": [true, false, null], "c": {"d": "e"}}'],
    ['escaped quotes and backslashes in strings', '{"q": "say \\"hi\\"", "b": "ends with \\\\", "c": "\\\\\\""}'],
    ['spaces, commas and colons inside strings', '{"t": "a, b: c { d } [ e ]"}'],
    ['control characters escaped by name and as \\u00xx', '{"t": "line\\nnext\\ttab\\u0001\\u001f"}'],
    ['astral characters (two UTF-16 units each)', '{"t": "😀😀 中文"}'],
    ['jsonb keeps trailing zeros', '{"n": 1.50, "m": 2.0, "z": 0.0}'],
    ['jsonb writes large and small numbers in full', '{"big": 1000000000000000000000, "small": 0.00000015, "neg": -0.000001}'],
    ['integers past double precision', '[12345678901234567890, 99999999999999999, -9007199254740993]'],
    ['exponents as a client may have written them', '[1e21, 1E-7, 2.5e+3]'],
    ['a number too large for a double (JSON.stringify writes null)', '[1e400]'],
    ['empty containers and strings', '{"a": {}, "b": [], "c": ""}'],
  ])('counts what JSON.stringify of the parsed value would: %s', (_, text) => {
    expect(compactJsonLength(text)).toBe(stringifiedLength(text));
  });

  it('agrees with JSON.stringify for any storable value, whether written compactly, as jsonb does, or indented', () => {
    fc.assert(
      fc.property(storableJson, (value) => {
        const expected = JSON.stringify(value).length;
        expect(compactJsonLength(JSON.stringify(value))).toBe(expected);
        expect(compactJsonLength(jsonbStyle(value))).toBe(expected);
        expect(compactJsonLength(JSON.stringify(value, null, 2))).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });
});

describe('holdsNonFiniteNumber', () => {
  it('finds NaN or ±Infinity at any depth, in objects and arrays, and nothing in any finite JSON value', () => {
    fc.assert(fc.property(storableJson, (value) => !holdsNonFiniteNumber(value)));
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      expect(holdsNonFiniteNumber(bad)).toBe(true);
      expect(holdsNonFiniteNumber([1, [2, { a: bad }]])).toBe(true);
      expect(holdsNonFiniteNumber({ a: 'x', b: [null, true, bad] })).toBe(true);
      expect(holdsNonFiniteNumber(JSON.parse('{"k":{"__proto__":{"z":1e400}}}'))).toBe(true);
    }
    expect(holdsNonFiniteNumber(JSON.parse('{"a":[1e308,-1.7976931348623157e308,1e-400]}'))).toBe(false);
  });

  it('walks a value nested far deeper than the call stack allows', () => {
    const deep = JSON.parse(`${'['.repeat(100_000)}1e400${']'.repeat(100_000)}`) as unknown;
    expect(holdsNonFiniteNumber(deep)).toBe(true);
  });
});
