// Integers a JSON number cannot carry as written. JSON.parse reads every number as a double, so an
// integer literal with more digits than a double holds comes out as another number, and jsonb would
// store that one without a word. Only the JSON text still has the digits: these read it.
import { closingQuote } from './parse-json.js';

/**
 * Why an integer written `literal` (JSON's digits after an optional `-`) cannot be stored as
 * written, as a 400 says it; undefined when it can. A JSON number is read as a double: an integer
 * the double does not hold as written (12345678901234567890123 reads as 1.2345678901234568e+22,
 * 9007199254740993 as 9007199254740992) would be stored as another number without a word. Every
 * integer up to ±(2^53−1) is held. A larger one is taken when its digits are what a double's own
 * text spells out in full (JSON.stringify(2 ** 60) is 1152921504606847000; PostgreSQL writes the
 * 1e20 it stored as 100000000000000000000): what the service answered, or a JavaScript client
 * wrote, can be sent again. Other digits are refused even where the double is the same value
 * (1152921504606846976 is 2^60 exactly): the service writes and stores the double's own text, so
 * they would come back changed. A literal beyond a double's range is left to the finite-number check.
 */
export function inexactIntegerRule(literal: string): string | undefined {
  const value = Number(literal);
  if (Number.isSafeInteger(value) || !Number.isFinite(value)) return undefined;
  if (digitsInFull(value) === (literal.startsWith('-') ? literal.slice(1) : literal)) return undefined;
  return `must be an integer that a JSON number (a double) holds as written: it would be stored as ${String(value)}; send it as a string`;
}

/** The digits of an integral double's shortest text, without an exponent (1.5e+22 → 15000000000000000000000). */
function digitsInFull(value: number): string {
  const text = String(Math.abs(value));
  const exponentAt = text.indexOf('e');
  if (exponentAt < 0) return text;
  // At 1e21 and above: one digit, maybe a fraction of the mantissa's digits, and the exponent.
  const digits = text.slice(0, exponentAt).replace('.', '');
  return digits.padEnd(Number(text.slice(exponentAt + 1)) + 1, '0');
}

const NUMBER_LITERAL = /-?\d+(\.\d+)?([eE][+-]?\d+)?/y;

/**
 * The first integer literal of a valid JSON text that a double does not hold as written
 * (inexactIntegerRule), with the path to it (keys and indexes) and the rule it breaks. A text
 * without a run of 16 digits has none (every integer up to 2^53−1, 16 digits, is held) and is not
 * walked at all.
 */
export function findInexactIntegerLiteral(text: string): { path: (string | number)[]; rule: string } | undefined {
  if (!/\d{16}/.test(text)) return undefined;
  // The path to the current value: an object's current key, an array's current index.
  const path: (string | number)[] = [];
  const inObject: boolean[] = [];
  let at = 0;
  while (at < text.length) {
    const char = text[at]!;
    if (char === '"') {
      const at0 = at;
      const end = closingQuote(text, at + 1);
      at = end + 1;
      while (at < text.length && ' \t\n\r'.includes(text[at]!)) at++;
      // A string followed by `:` is an object's key: the path moves to it.
      if (inObject.at(-1) && text[at] === ':') path[path.length - 1] = JSON.parse(text.slice(at0, end + 1)) as string;
    } else if (char === '{' || char === '[') {
      inObject.push(char === '{');
      path.push(char === '{' ? '' : 0);
      at++;
    } else if (char === '}' || char === ']') {
      inObject.pop();
      path.pop();
      at++;
    } else if (char === ',') {
      if (inObject.at(-1) === false) path[path.length - 1] = (path.at(-1) as number) + 1;
      at++;
    } else if (char === '-' || (char >= '0' && char <= '9')) {
      NUMBER_LITERAL.lastIndex = at;
      const match = NUMBER_LITERAL.exec(text)!;
      const rule = match[1] === undefined && match[2] === undefined ? inexactIntegerRule(match[0]) : undefined;
      if (rule) return { path, rule };
      at += match[0].length;
    } else {
      at++; // whitespace, ':', and the letters of true, false and null
    }
  }
  return undefined;
}
