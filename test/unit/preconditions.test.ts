import { describe, expect, it } from 'vitest';
import { assertIfMatch, etagOf, parseIfMatch } from '../../src/lib/preconditions.js';
import { thrownAppError } from '../support/app-error.js';

const thrown = thrownAppError;

describe('If-Match', () => {
  it('writes the ETag of a revision as a quoted number', () => {
    expect(etagOf(7)).toBe('"7"');
  });

  it.each([
    [undefined, undefined],
    ['"7"', [7]],
    ['W/"7"', [7]],
    ['7', [7]],
    ['*', '*'],
    [' * ', '*'],
    ['"3", "4"', [3, 4]],
    [['"3"', '"5"'], [3, 5]],
  ])('parses %j', (header, expected) => {
    expect(parseIfMatch(header)).toEqual(expected);
  });

  it.each(['', 'abc', '"-1"', '"1.5"', '"3", abc', '**', '"1234567890123456"', '"7', '7"'])('rejects %j with InvalidParameter naming If-Match', (header) => {
    const error = thrown(() => parseIfMatch(header));
    expect(error.code).toBe('InvalidParameter');
    expect(error.status).toBe(400);
    expect(error.details).toEqual({ issues: [{ field: 'If-Match', message: expect.any(String) }] });
  });

  it('compares tags as written: "01", W/"01" or 007 match no revision, so they fail with 412', () => {
    for (const header of ['"01"', 'W/"01"', '007', '"00"']) {
      const error = thrown(() => assertIfMatch(parseIfMatch(header), 1));
      expect(error.code, header).toBe('FailedOperation.PreconditionFailed');
      expect(error.details).toEqual({ currentRevision: 1 });
    }
    expect(() => assertIfMatch(parseIfMatch('"01", "1"'), 1)).not.toThrow();
  });

  it('passes when there is no precondition, a wildcard or a matching revision', () => {
    expect(() => assertIfMatch(undefined, 5)).not.toThrow();
    expect(() => assertIfMatch('*', 5)).not.toThrow();
    expect(() => assertIfMatch([5], 5)).not.toThrow();
    expect(() => assertIfMatch([4, 5], 5)).not.toThrow();
  });

  it('fails with 412 and the current revision when no tag matches', () => {
    const error = thrown(() => assertIfMatch([4], 5));
    expect(error.code).toBe('FailedOperation.PreconditionFailed');
    expect(error.status).toBe(412);
    expect(error.details).toEqual({ currentRevision: 5 });
    expect(error.headers).toEqual({ etag: '"5"' });
    expect(error.message).toContain('5');
  });
});
