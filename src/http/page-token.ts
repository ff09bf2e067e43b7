// Opaque keyset page tokens. A token carries the position after the last item of a page and a
// fingerprint of the query that produced it, account included: reusing it with other filters, on
// another list or by another account is an error rather than a silently wrong page. Every query is
// also scoped by account in SQL, so even a forged token can only move a cursor inside the caller's
// own data. A token is accepted only byte for byte as issued: an edited one is refused even when
// it would decode to the same content (other base64 alphabet, padding, JSON whitespace).
import { AppError } from '../errors.js';
import { canonicalJson, sha256 } from '../lib/canonical-json.js';

type Position = (string | number)[];

/** Everything that shapes a list's result except the token and the page size; always the account. */
export type TokenQuery = { accountId: string } & Record<string, unknown>;

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

function encodeBody(q: string, position: Position): string {
  const body: TokenBody = { q, p: position, c: checksum(q, position) };
  return Buffer.from(JSON.stringify(body)).toString('base64url');
}

export function encodePageToken(query: TokenQuery, position: Position): string {
  return encodeBody(fingerprint(query), position);
}

export function decodePageToken(token: string, query: TokenQuery): Position {
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
    body.c === checksum(body.q, body.p) &&
    encodeBody(body.q, body.p) === token;
  if (!wellFormed) throw invalidToken('it is not a token this service issued');
  if (body.q !== fingerprint(query)) throw invalidToken('it was issued for a query with other filters or order');
  return body.p;
}

function invalidToken(why: string): AppError {
  return new AppError('InvalidParameter.PageToken', `pageToken is invalid: ${why}.`, {
    details: { issues: [{ field: 'pageToken', message: why }] },
  });
}
