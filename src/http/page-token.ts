// Opaque keyset page tokens. A token carries the position after the last item of a page and a
// fingerprint of the query that produced it: reusing it with other filters is an error rather
// than a silently wrong page. Every query is also scoped by account in SQL, so a forged token can
// only move a cursor inside the caller's own data.
import { AppError } from '../errors.js';
import { canonicalJson, sha256 } from '../lib/canonical-json.js';

type Position = (string | number)[];

interface TokenBody {
  q: string; // query fingerprint
  p: Position;
  c: string; // checksum of q and p, to catch truncated or edited tokens
}

function fingerprint(query: Record<string, unknown>): string {
  return sha256(canonicalJson(query)).subarray(0, 12).toString('base64url');
}

function checksum(q: string, p: Position): string {
  return sha256(`${q}|${canonicalJson(p)}`).subarray(0, 8).toString('base64url');
}

/** `query` is everything that shapes the result except the token and the page size. */
export function encodePageToken(query: Record<string, unknown>, position: Position): string {
  const q = fingerprint(query);
  const body: TokenBody = { q, p: position, c: checksum(q, position) };
  return Buffer.from(JSON.stringify(body)).toString('base64url');
}

export function decodePageToken(token: string, query: Record<string, unknown>): Position {
  let body: TokenBody;
  try {
    body = JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as TokenBody;
  } catch {
    throw invalidToken('it is not a token this service issued');
  }
  const wellFormed =
    body !== null &&
    typeof body === 'object' &&
    typeof body.q === 'string' &&
    Array.isArray(body.p) &&
    body.p.every((item) => typeof item === 'string' || typeof item === 'number') &&
    body.c === checksum(body.q, body.p);
  if (!wellFormed) throw invalidToken('it is not a token this service issued');
  if (body.q !== fingerprint(query)) throw invalidToken('it was issued for a query with other filters or order');
  return body.p;
}

function invalidToken(why: string): AppError {
  return new AppError('InvalidParameter.PageToken', `pageToken is invalid: ${why}.`, {
    details: { issues: [{ field: 'pageToken', message: why }] },
  });
}
