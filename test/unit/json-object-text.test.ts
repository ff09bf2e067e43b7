import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { everyTopLevelKey, joinJsonObjects } from '../../src/lib/json-object-text.js';

// Keys the walk could misread: quotes, backslashes, brackets and commas inside them, the scopes'
// prefixes, and strings of every kind.
const key = fc.oneof(
  fc.string(),
  fc.string({ unit: 'binary' }),
  fc.constantFrom('user:a', 'app:b', 'temp:c', 'a', '\\', '"', '\\"', 'a\\', '{', '}', '[', ']', ',', ':', 'user:"x', '', ' '),
);
const value = fc.jsonValue().chain((inner) => fc.oneof(fc.constant(inner), fc.dictionary(key, fc.constant(inner)), fc.constant([inner, { [','.repeat(2)]: '"}]' }])));
const object = fc.dictionary(key, value, { maxKeys: 8 });
/** JSON text spaced as PostgreSQL writes jsonb: `{"a": 1, "b": [1, 2]}`. */
const spaced = (v: unknown): string => {
  if (Array.isArray(v)) return `[${v.map(spaced).join(', ')}]`;
  if (v !== null && typeof v === 'object') return `{${Object.entries(v).map(([k, inner]) => `${JSON.stringify(k)}: ${spaced(inner)}`).join(', ')}}`;
  return JSON.stringify(v);
};
/** The text of `o` compact, spaced as PostgreSQL writes it, and indented. */
const texts = (o: object) => [JSON.stringify(o), spaced(o), JSON.stringify(o, null, 2)];

describe('everyTopLevelKey', () => {
  it('answers what Object.keys(JSON.parse(text)).every(test) does, for any object and any test', () => {
    fc.assert(
      fc.property(object, fc.string({ maxLength: 2 }), (o, prefix) => {
        const test = (k: string) => !k.startsWith(prefix) || prefix === '';
        const seen: string[] = [];
        for (const text of texts(o)) {
          expect(everyTopLevelKey(text, test)).toBe(Object.keys(o).every(test));
          seen.length = 0;
          everyTopLevelKey(text, (k) => (seen.push(k), true));
          expect(seen).toEqual(Object.keys(o));
        }
      }),
      { numRuns: 500 },
    );
  });

  it('decodes a key written with escapes before testing it', () => {
    // `\u0075` is `u`: the key is user:x, though its text does not start with `user:`.
    expect(everyTopLevelKey('{"\\u0075ser:x": 1}', (k) => !k.startsWith('user:'))).toBe(false);
    expect(everyTopLevelKey('{"a\\"b": {"c": "}"}, "d": "\\\\"}', (k) => ['a"b', 'd'].includes(k))).toBe(true);
  });

  it('reads the keys of the outer object only, not those of nested objects or arrays', () => {
    const keys: string[] = [];
    everyTopLevelKey('{"a": {"b": [{"c": 1}, "d,", {"e": {}}]}, "f": [], "g": "{\\"h\\": 1}"}', (k) => (keys.push(k), true));
    expect(keys).toEqual(['a', 'f', 'g']);
  });
});

describe('joinJsonObjects', () => {
  it('is the object of all members in order, for objects of disjoint keys', () => {
    fc.assert(
      fc.property(fc.array(object, { minLength: 1, maxLength: 4 }), (objects) => {
        // Disjoint by a prefix per object, as the scopes are.
        const disjoint = objects.map((o, i) => Object.fromEntries(Object.entries(o).map(([k, v]) => [`${i}:${k}`, v])));
        // As the texts carry it: JSON.stringify writes -0, which fc.jsonValue() makes, as 0.
        const expected = JSON.parse(JSON.stringify(Object.assign({}, ...disjoint))) as object;
        for (const pick of [0, 1, 2]) {
          const joined = joinJsonObjects(disjoint.map((o) => texts(o)[pick]!));
          expect(JSON.parse(joined)).toEqual(expected);
          expect(Object.keys(JSON.parse(joined))).toEqual(Object.keys(expected));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('leaves empty objects out', () => {
    expect(joinJsonObjects(['{}', '{"a": 1}', '{ }', '{"b": 2}', '{}'])).toBe('{"a": 1,"b": 2}');
    expect(joinJsonObjects(['{}', '{}'])).toBe('{}');
  });
});
