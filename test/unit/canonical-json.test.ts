// The canonical text is hashed into every stored event (payload_hash): a retry of an event stored
// by an earlier release must hash the same, so the one-pass writer (issue 24) must give exactly the
// text of the writer it replaced. That writer is kept here as the reference.
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalJson, sha256, sha256Hex } from '../../src/lib/canonical-json.js';

/** The earlier canonicalJson: JSON.stringify with a replacer that made a sorted copy of each object. */
function replacerCanonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}

// Keys that stress the order rules: integer-like ones (which objects list first, numerically),
// near misses ("01", "-1", "4294967295", "1.5"), non-ASCII and astral characters, and __proto__.
const trickyKey = fc.oneof(
  fc.string(),
  fc.constantFrom('0', '1', '2', '9', '10', '01', '-1', '1.5', '4294967294', '4294967295', '99999999999', '__proto__', 'constructor', 'é', 'Z', 'a', '😀', '\u{10000}', '\uffff', ''),
  fc.nat().map(String),
);

const jsonLike = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.double(),
    fc.integer(),
    fc.string({ unit: 'grapheme' }),
    fc.array(tie('value'), { maxLength: 5 }),
    fc.dictionary(trickyKey, tie('value'), { maxKeys: 6 }),
  ),
})).value;

describe('canonicalJson', () => {
  it('writes exactly the text of the replacer-based writer it replaced, for any JSON-like value', () => {
    fc.assert(
      fc.property(jsonLike, (value) => {
        expect(canonicalJson(value)).toBe(replacerCanonicalJson(value));
      }),
      { numRuns: 2_000 },
    );
  });

  it('keeps that text where a value is not plain JSON: undefined members, dates, a __proto__ key from JSON.parse', () => {
    const values: unknown[] = [
      { b: undefined, a: [undefined, () => 1, Symbol('s')], c: () => 1 },
      { when: new Date(0), nested: { toJSON: () => ({ z: 1, a: 2 }) } },
      JSON.parse('{"__proto__": {"x": 1}, "b": 1, "10": 2, "9": 3, "a": {"__proto__": 5}}'),
      [Number.NaN, Number.POSITIVE_INFINITY, -0],
      'text',
      7,
    ];
    for (const value of values) expect(canonicalJson(value)).toBe(replacerCanonicalJson(value));
    expect(canonicalJson({ b: 1, 10: 2, 9: 3, a: 4 })).toBe('{"9":3,"10":2,"a":4,"b":1}');
  });
});

describe('sha256', () => {
  it('is the SHA-256 digest of the UTF-8 text, as createHash gives it', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(sha256(text).equals(createHash('sha256').update(text).digest())).toBe(true);
      }),
    );
  });

  it('sha256Hex is the same digest in lowercase hex', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), (text) => {
        expect(sha256Hex(text)).toBe(createHash('sha256').update(text).digest('hex'));
      }),
    );
  });
});
