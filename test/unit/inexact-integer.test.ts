import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { findInexactInteger } from '../../src/http/request-text.js';
import { unstorableText } from '../../src/lib/unstorable-text.js';

const fieldOf = (text: string) => findInexactInteger(text)?.details;

describe('findInexactInteger', () => {
  it.each([
    ['{"a":{"b":[1,2,{"c":12345678901234567890123}]}}', 'a.b[2].c', '1.2345678901234568e+22'],
    ['[0, 9007199254740993]', '[1]', '9007199254740992'],
    ['-9007199254740993', 'body', '-9007199254740992'],
    ['{ "k" \n :\t 99999999999999999999 }', 'k', '100000000000000000000'],
    ['{"x":"\\\\","y":[{},[],"\\"",12345678901234567890]}', 'y[3]', '12345678901234567000'],
    ['{"":{"a":1,"z":-12345678901234567890}}', 'z', '-12345678901234567000'], // an empty key is named as the request-text rules name it
    // 2^60's exact digits: the double holds the value, but it is written (and stored) as 1152921504606847000.
    ['{"p":1152921504606846976}', 'p', '1152921504606847000'],
  ])('names the field of %s, and what it would be stored as', (text, field, stored) => {
    expect(fieldOf(text)).toEqual({ issues: [{ field, message: `must be an integer that a JSON number (a double) holds as written: it would be stored as ${stored}; send it as a string` }] });
  });

  it.each([
    '9007199254740991',
    '-9007199254740991',
    '9007199254740992', // 2^53: a double holds it as written
    '1152921504606847000', // JSON.stringify(2 ** 60)
    '100000000000000000000', // 1e20, as PostgreSQL writes it back
    '-12345678901234568000000', // -1.2345678901234568e+22 written in full
    '1'.padEnd(301, '0'), // 1e300 in full
    '9'.repeat(310), // beyond a double: Infinity, which the finite-number check refuses
    '1e22',
    '12345678901234567890.5',
    '"12345678901234567890"',
    '{"12345678901234567890":1}',
    '0.000000000000000001',
  ])('takes %s', (text) => {
    expect(findInexactInteger(text)).toBeUndefined();
  });

  it('takes every integer JSON.stringify writes, however large', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.jsonValue(), fc.bigInt({ min: -(2n ** 80n), max: 2n ** 80n }).map(Number), fc.double({ noNaN: true, noDefaultInfinity: true }).map(Math.round))), (value) => {
        expect(findInexactInteger(JSON.stringify(value))).toBeUndefined();
      }),
      { numRuns: 500 },
    );
  });

  it('refuses an integer literal exactly when the double it reads as is written with other digits', () => {
    // The oracle: the decimal value of JSON.stringify's text for the double, compared as a BigInt.
    const decimalOf = (text: string): bigint => {
      const [mantissa = '', exponent = '0'] = text.split('e');
      const [whole = '', fraction = ''] = mantissa.split('.');
      return BigInt(whole + fraction) * 10n ** BigInt(Number(exponent) - fraction.length);
    };
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 90n), max: 2n ** 90n }), (integer) => {
        const literal = String(integer);
        const expected = decimalOf(JSON.stringify(Number(literal))) !== integer;
        expect(findInexactInteger(`{"n":${literal}}`) !== undefined).toBe(expected);
      }),
      { numRuns: 2000 },
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
