// The timestamptz reader (src/db/timestamp-text.ts) replaced pg's own on every row: it must answer
// what pg's parser (postgres-date) answers, for what PostgreSQL writes and for anything else.
import fc from 'fast-check';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { timestamptzFromText } from '../../src/db/timestamp-text.js';

const pgTimestamptz = pg.types.getTypeParser(1184, 'text') as (text: string) => unknown;

/** What each reader makes of the text: a Date's time (NaN for an invalid one), or what else it answered. */
const readBy = (reader: (text: string) => unknown, text: string) => {
  const value = reader(text);
  return value instanceof Date ? { time: value.getTime() } : { other: value };
};

const bothRead = (text: string) => {
  let otherwiseCalled = false;
  const fast = readBy(
    (value) =>
      timestamptzFromText(value, (rest) => {
        otherwiseCalled = true;
        return pgTimestamptz(rest);
      }),
    text,
  );
  return { fast, pg: readBy(pgTimestamptz, text), otherwiseCalled };
};

const two = (max: number) => fc.integer({ min: 0, max }).map((n) => String(n).padStart(2, '0'));

// The form PostgreSQL writes with DateStyle ISO, in every time zone it may be set to.
const written = fc
  .tuple(
    fc.integer({ min: 1000, max: 9999 }),
    fc.integer({ min: 1, max: 12 }).map((n) => String(n).padStart(2, '0')),
    fc.integer({ min: 1, max: 28 }).map((n) => String(n).padStart(2, '0')),
    two(23),
    two(59),
    two(59),
    fc.option(fc.stringMatching(/^[0-9]{1,6}$/), { nil: undefined }),
    fc.constantFrom('+', '-'),
    two(15),
    fc.option(fc.constantFrom('30', '45', '00'), { nil: undefined }),
  )
  .map(([y, mo, d, h, mi, s, fraction, sign, oh, om]) => `${y}-${mo}-${d} ${h}:${mi}:${s}${fraction === undefined ? '' : `.${fraction}`}${sign}${oh}${om === undefined ? '' : `:${om}`}`);

describe('the timestamptz reader', () => {
  it('reads what PostgreSQL writes as pg does, itself', () => {
    fc.assert(
      fc.property(written, (text) => {
        const { fast, pg: expected, otherwiseCalled } = bothRead(text);
        expect(fast).toEqual(expected);
        expect(otherwiseCalled).toBe(false);
      }),
      { numRuns: 5_000 },
    );
  });

  it('hands what it does not read to pg, and so answers as pg does for anything', () => {
    const near = written.chain((text) =>
      fc.oneof(
        fc.constant(text),
        fc.nat({ max: text.length }).map((cut) => text.slice(0, cut)),
        fc.tuple(fc.nat({ max: text.length - 1 }), fc.string({ minLength: 1, maxLength: 1 })).map(([at, char]) => `${text.slice(0, at)}${char}${text.slice(at + 1)}`),
        fc.constant(`${text} BC`),
        fc.constant(`${text}:15`),
      ),
    );
    fc.assert(
      fc.property(fc.oneof(near, fc.string(), fc.constantFrom('infinity', '-infinity', '0099-01-01 00:00:00+00', '12345-01-01 00:00:00+00', '2026-12-07 17:32:30.+00', '2026-12-07 17:32:30.1234567+00')), (text) => {
        const { fast, pg: expected } = bothRead(text);
        expect(fast).toEqual(expected);
      }),
      { numRuns: 5_000 },
    );
  });

  it('keeps the milliseconds and drops the digits past them, as pg does', () => {
    expect((timestamptzFromText('2026-12-07 17:32:30.029999+00', pgTimestamptz) as Date).toISOString()).toBe('2026-12-07T17:32:30.029Z');
    expect((timestamptzFromText('2026-12-07 17:32:30.5-03:30', pgTimestamptz) as Date).toISOString()).toBe('2026-12-07T21:02:30.500Z');
  });
});
