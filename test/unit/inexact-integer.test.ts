import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findInexactInteger, unstorableText } from '../../src/http/request-text.js';

const fieldOf = (text: string) => findInexactInteger(text)?.details;

describe('findInexactInteger', () => {
  it.each([
    ['{"a":{"b":[1,2,{"c":12345678901234567890123}]}}', 'a.b[2].c'],
    ['[0, 9007199254740992]', '[1]'],
    ['-9007199254740992', 'body'],
    ['{ "k" \n :\t 99999999999999999999 }', 'k'],
    ['{"x":"\\\\","y":[{},[],"\\"",12345678901234567890]}', 'y[3]'],
    ['{"":{"a":1,"z":-12345678901234567890}}', 'z'], // an empty key is named as the request-text rules name it
  ])('names the field of %s', (text, field) => {
    expect(fieldOf(text)).toEqual({ issues: [{ field, message: expect.stringContaining('±(2^53−1)') }] });
  });

  it.each(['9007199254740991', '-9007199254740991', '1e22', '12345678901234567890.5', '"12345678901234567890"', '{"12345678901234567890":1}', '0.000000000000000001'])(
    'takes %s',
    (text) => {
      expect(findInexactInteger(text)).toBeUndefined();
    },
  );

  it('refuses a JSON text exactly when it holds an integer literal beyond ±(2^53−1)', () => {
    fc.assert(
      // Integers around 2^53 mixed into any JSON, so both answers come up often.
      fc.property(fc.array(fc.oneof(fc.jsonValue(), fc.bigInt({ min: -(2n ** 60n), max: 2n ** 60n }).map(Number))), (value) => {
        const text = JSON.stringify(value);
        // JSON.stringify writes integral doubles below 1e21 as integer literals, larger ones with an exponent.
        let expected = false;
        JSON.parse(text, (_key, item: unknown) => {
          if (typeof item === 'number' && Number.isInteger(item) && Math.abs(item) < 1e21 && !Number.isSafeInteger(item)) expected = true;
          return item;
        });
        expect(findInexactInteger(text) !== undefined).toBe(expected);
      }),
      { numRuns: 500 },
    );
  });
});

// The body parser skips the walk for unstorable text when the JSON text has no `\u` escape
// (request-text.ts, bodiesWithoutEscapes): such a text, once decoded from UTF-8, cannot parse to a
// string or key that unstorableText refuses.
describe('JSON text without a \\u escape', () => {
  it('never parses to a string or key holding U+0000 or a lone surrogate', () => {
    const decodedFromUtf8 = (text: string) => Buffer.from(text, 'utf8').toString('utf8') === text;
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.string({ unit: 'binary', maxLength: 10 }), (value, key) => {
        const text = `{"${key}":"${value}"}`;
        fc.pre(!text.includes('\\u') && decodedFromUtf8(text));
        let parsed: Record<string, string>;
        try {
          parsed = JSON.parse(text) as Record<string, string>;
        } catch {
          return; // not JSON: the parser refuses it before any walk
        }
        for (const [k, v] of Object.entries(parsed)) {
          expect(unstorableText(k)).toBeUndefined();
          expect(unstorableText(v)).toBeUndefined();
        }
      }),
      { numRuns: 2_000 },
    );
    // …while the same characters written as escapes are found.
    expect(unstorableText(JSON.parse('"a\\u0000b"') as string)).toMatch(/U\+0000/);
    expect(unstorableText(JSON.parse('"\\ud800"') as string)).toMatch(/surrogate/);
  });
});
