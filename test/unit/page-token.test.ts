import { describe, expect, it } from 'vitest';
import { createHash, createHmac } from 'node:crypto';
import { canonicalJson } from '../../src/lib/canonical-json.js';
import { PageTokens } from '../../src/lib/page-token.js';
import { thrownAppError } from '../support/app-error.js';

const KEY = Buffer.alloc(32, 1);
const tokens = new PageTokens(KEY);
const KINDS = ['time', 'id', 'id'] as const;
const encodePageToken = (q: Record<string, unknown> & { accountId: string }, p: (string | number)[]) => tokens.encode(q, p);
const decodePageToken = (token: string, q: Record<string, unknown> & { accountId: string }, kinds: readonly ('time' | 'id' | 'seq')[] = KINDS) =>
  tokens.decode(token, q, kinds);

const query = { accountId: 'acct-1', spaceId: 'space-1', orderBy: 'updateTime', order: 'desc', titleLike: 'trip', metadata: ['env=prod'] };
const position = ['2026-11-29T21:34:32.123Z', 'alice', 'session-7'];

const pageTokenError = thrownAppError;

describe('page tokens', () => {
  it('round-trips the position for the same query', () => {
    const token = encodePageToken(query, position);
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/); // safe in a query string as is
    expect(decodePageToken(token, query)).toEqual(position);
  });

  it('keeps numbers as numbers', () => {
    const numeric = { accountId: 'acct-1', order: 'asc' };
    expect(decodePageToken(encodePageToken(numeric, [42]), numeric, ['seq'])).toEqual([42]);
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
    ['a position with an object', Buffer.from(JSON.stringify({ q: 'x', p: [{}], s: 'y' })).toString('base64url')],
    // The same content in another spelling: a token is only ever accepted exactly as issued.
    ['the standard base64 alphabet with padding', Buffer.from(encodePageToken(query, position), 'base64url').toString('base64')],
    ['the token with padding', `${encodePageToken(query, position)}==`],
    ['a character outside the alphabet inserted', `${encodePageToken(query, position).slice(0, 4)}.${encodePageToken(query, position).slice(4)}`],
    ['its JSON with whitespace', Buffer.from(JSON.stringify(JSON.parse(Buffer.from(encodePageToken(query, position), 'base64url').toString()), null, 1)).toString('base64url')],
    ['its JSON with an extra field', Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(encodePageToken(query, position), 'base64url').toString()), x: 1 })).toString('base64url')],
  ])('rejects %s', (_why, token) => {
    expect(pageTokenError(() => decodePageToken(token, query)).code).toBe('InvalidParameter.PageToken');
  });

  /** A token as the unsigned scheme built it: anyone could, from the token's own contents. */
  function unsignedToken(q: string, p: unknown[]): string {
    const c = createHash('sha256').update(`${q}|${canonicalJson(p)}`).digest().subarray(0, 8).toString('base64url');
    return Buffer.from(JSON.stringify({ q, p, c })).toString('base64url');
  }

  function bodyOf(token: string): { q: string; p: unknown[]; s: string } {
    return JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { q: string; p: unknown[]; s: string };
  }

  it('rejects a token forged by recomputing the old plain SHA-256 check value, with the issued fingerprint', () => {
    const { q } = bodyOf(encodePageToken(query, position));
    const forged = unsignedToken(q, ['1970-01-01T00:00:00.000Z', 'alice', 'session-7']);
    expect(pageTokenError(() => decodePageToken(forged, query)).code).toBe('InvalidParameter.PageToken');
  });

  it('rejects a token signed under another key, and one whose signature was recomputed without the key', () => {
    const other = new PageTokens(Buffer.alloc(32, 2)).encode(query, position);
    expect(pageTokenError(() => decodePageToken(other, query)).code).toBe('InvalidParameter.PageToken');
    const { q } = bodyOf(encodePageToken(query, position));
    const p = ['1970-01-01T00:00:00.000Z', 'alice', 'session-7'];
    const s = createHmac('sha256', Buffer.alloc(32)).update(`${q}|${canonicalJson(p)}`).digest().subarray(0, 16).toString('base64url');
    expect(pageTokenError(() => decodePageToken(Buffer.from(JSON.stringify({ q, p, s })).toString('base64url'), query)).code).toBe('InvalidParameter.PageToken');
  });

  it('refuses a key shorter than 32 bytes', () => {
    expect(() => new PageTokens(Buffer.alloc(31))).toThrow(/32 bytes/);
  });

  it.each([
    ['a time that is not ISO 8601', ['Tue Dec 01 2026', 'a', 'b'], KINDS],
    ['a time that is a bare number string', ['1', 'a', 'b'], KINDS],
    ['an ISO time in another spelling than issued', ['2026-12-01T00:00:00Z', 'a', 'b'], KINDS],
    ['a number where an id belongs', ['2026-12-01T00:00:00.000Z', 7, 'b'], KINDS],
    ['an empty id', ['2026-12-01T00:00:00.000Z', '', 'b'], KINDS],
    ['too few values', ['2026-12-01T00:00:00.000Z', 'a'], KINDS],
    ['too many values', ['2026-12-01T00:00:00.000Z', 'a', 'b', 'c'], KINDS],
    ['a negative seq', [-1], ['seq']],
    ['a string seq', ['x'], ['seq']],
    ['a fractional seq', [1.5], ['seq']],
    ['an unsafe seq', [2 ** 53], ['seq']],
  ] as const)('rejects a correctly signed token carrying %s', (_why, cursor, kinds) => {
    const error = pageTokenError(() => decodePageToken(encodePageToken(query, [...cursor]), query, kinds));
    expect(error.code).toBe('InvalidParameter.PageToken');
    expect(error.details).toEqual({ issues: [{ field: 'pageToken', message: 'it is not a token of this list' }] });
  });

  it('accepts each kind as issued', () => {
    expect(decodePageToken(encodePageToken(query, [0]), query, ['seq'])).toEqual([0]);
    expect(decodePageToken(encodePageToken(query, ['0001-01-01T00:00:00.000Z', 'a']), query, ['time', 'id'])).toEqual(['0001-01-01T00:00:00.000Z', 'a']);
  });
});
