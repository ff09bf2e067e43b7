import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { decodePageToken, encodePageToken } from '../../src/http/page-token.js';

const query = { accountId: 'acct-1', spaceId: 'space-1', orderBy: 'updateTime', order: 'desc', titleLike: 'trip', metadata: ['env=prod'] };
const position = ['2026-11-29T21:34:32.123Z', 'alice', 'session-7'];

function pageTokenError(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    if (error instanceof AppError) return error;
    throw error;
  }
  throw new Error('expected the token to be rejected');
}

describe('page tokens', () => {
  it('round-trips the position for the same query', () => {
    const token = encodePageToken(query, position);
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/); // safe in a query string as is
    expect(decodePageToken(token, query)).toEqual(position);
  });

  it('keeps numbers as numbers', () => {
    const numeric = { accountId: 'acct-1', order: 'asc' };
    expect(decodePageToken(encodePageToken(numeric, [42]), numeric)).toEqual([42]);
  });

  it('does not depend on the order of the query keys', () => {
    const token = encodePageToken(query, position);
    const reordered = { metadata: ['env=prod'], titleLike: 'trip', order: 'desc', orderBy: 'updateTime', spaceId: 'space-1', accountId: 'acct-1' };
    expect(decodePageToken(token, reordered)).toEqual(position);
  });

  it.each([
    ['another filter value', { ...query, titleLike: 'holiday' }],
    ['another order', { ...query, order: 'asc' }],
    ['an extra filter', { ...query, userId: ['bob'] }],
    ['a missing filter', { accountId: 'acct-1', spaceId: 'space-1', orderBy: 'updateTime', order: 'desc', metadata: ['env=prod'] }],
    ['another account', { ...query, accountId: 'acct-2' }],
  ])('rejects a token reused with %s', (_why, otherQuery) => {
    const error = pageTokenError(() => decodePageToken(encodePageToken(query, position), otherQuery));
    expect(error.code).toBe('InvalidParameter.PageToken');
    expect(error.status).toBe(400);
    expect(error.details).toEqual({ issues: [{ field: 'pageToken', message: expect.stringContaining('other filters') }] });
  });

  it('rejects a token whose position was edited', () => {
    const token = encodePageToken(query, position);
    const body = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { p: unknown[] };
    body.p = ['1970-01-01T00:00:00.000Z', 'alice', 'session-7'];
    const tampered = Buffer.from(JSON.stringify(body)).toString('base64url');
    expect(pageTokenError(() => decodePageToken(tampered, query)).code).toBe('InvalidParameter.PageToken');
  });

  it.each([
    ['garbage', 'not a token at all'],
    ['base64 of non-JSON', Buffer.from('hello').toString('base64url')],
    ['JSON null', Buffer.from('null').toString('base64url')],
    ['a JSON array', Buffer.from('[1,2]').toString('base64url')],
    ['a truncated token', encodePageToken(query, position).slice(0, -6)],
    ['a position with an object', Buffer.from(JSON.stringify({ q: 'x', p: [{}], c: 'y' })).toString('base64url')],
    // The same content in another spelling: a token is only ever accepted exactly as issued.
    ['the standard base64 alphabet with padding', Buffer.from(encodePageToken(query, position), 'base64url').toString('base64')],
    ['the token with padding', `${encodePageToken(query, position)}==`],
    ['a character outside the alphabet inserted', `${encodePageToken(query, position).slice(0, 4)}.${encodePageToken(query, position).slice(4)}`],
    ['its JSON with whitespace', Buffer.from(JSON.stringify(JSON.parse(Buffer.from(encodePageToken(query, position), 'base64url').toString()), null, 1)).toString('base64url')],
    ['its JSON with an extra field', Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(encodePageToken(query, position), 'base64url').toString()), x: 1 })).toString('base64url')],
  ])('rejects %s', (_why, token) => {
    expect(pageTokenError(() => decodePageToken(token, query)).code).toBe('InvalidParameter.PageToken');
  });
});
