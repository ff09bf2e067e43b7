// timestamptz values as PostgreSQL writes them in text (DateStyle ISO: `2026-12-07 17:32:30.123456+00`,
// `… 17:32:30+05:30`), read into a Date without pg's general parser (postgres-date), which matches
// three regular expressions against every value: an append's answer carries three of them, and
// a read's page one per event (issue 24). Only that one common form is read here, at millisecond
// precision as postgres-date reads it (the digits past the third are dropped, not rounded); any
// other (infinity, a BC date, a year outside 1000–9999, an offset with seconds, a DateStyle
// other than ISO) goes to `otherwise`, pg's own parser.
//
// test/unit/timestamp-text.test.ts holds the two to the same answers.

const ZERO = 48;

/** The value of the `count` decimal digits at `at`, or -1 if one of them is not a digit. */
function digits(text: string, at: number, count: number): number {
  let value = 0;
  for (let index = at; index < at + count; index++) {
    const digit = text.charCodeAt(index) - ZERO;
    if (digit < 0 || digit > 9) return -1;
    value = value * 10 + digit;
  }
  return value;
}

/** A timestamptz's text as a Date; `otherwise` reads what is not in the common form. */
export function timestamptzFromText(text: string, otherwise: (text: string) => unknown): unknown {
  // yyyy-mm-dd hh:mm:ss, then an optional fraction and the offset.
  if (text.length < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) {
    return otherwise(text);
  }
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (year < 1000 || month < 0 || day < 0 || hour < 0 || minute < 0 || second < 0) return otherwise(text);
  let at = 19;
  let millisecond = 0;
  if (text.charCodeAt(at) === 46) {
    // '.': one to six digits; the first three are the milliseconds.
    let count = 0;
    for (at++; count < 6 && at < text.length; at++, count++) {
      const digit = text.charCodeAt(at) - ZERO;
      if (digit < 0 || digit > 9) break;
      if (count < 3) millisecond += digit * (count === 0 ? 100 : count === 1 ? 10 : 1);
    }
    if (count === 0) return otherwise(text);
  }
  // The offset: +hh or -hh, then :mm or nothing, and the end of the text.
  const sign = text.charCodeAt(at);
  if (sign !== 43 && sign !== 45) return otherwise(text);
  const offsetHours = digits(text, at + 1, 2);
  let offsetMinutes = 0;
  if (text.length === at + 6 && text.charCodeAt(at + 3) === 58) offsetMinutes = digits(text, at + 4, 2);
  else if (text.length !== at + 3) return otherwise(text);
  if (offsetHours < 0 || offsetMinutes < 0) return otherwise(text);
  const offsetMs = (offsetHours * 60 + offsetMinutes) * 60_000 * (sign === 43 ? 1 : -1);
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, millisecond) - offsetMs);
}
