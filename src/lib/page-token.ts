// Opaque keyset page tokens. A token carries the position after the last item of a page and a
// fingerprint of the query that produced it, account included: reusing it with other filters, on
// another list or by another account is an error rather than a silently wrong page.
//
// A token is signed (HMAC-SHA256 under PAGE_TOKEN_KEY, or the key generated into the data
// directory): a client cannot build one with a cursor of its choosing, and a token is accepted only
// byte for byte as issued (other base64 alphabet, padding or JSON whitespace are refused). The
// position is still checked value by value against the list's cursor shape before it reaches SQL,
// so that even a token signed under a leaked key can only be a 400, never a cast error.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors.js';
import { canonicalJson, sha256 } from './canonical-json.js';
import { parseJson } from './parse-json.js';

type Position = (string | number)[];

/** Everything that shapes a list's result except the token and the page size; always the account. */
export type TokenQuery = { accountId: string } & Record<string, unknown>;

/**
 * The kind of each cursor value: `time` an ISO 8601 instant exactly as toISOString() writes it,
 * `id` a non-empty string, `seq` a safe non-negative integer.
 */
export type CursorKind = 'time' | 'id' | 'seq';
type CursorValue<K extends CursorKind> = K extends 'seq' ? number : string;
export type Cursor<K extends readonly CursorKind[]> = { -readonly [I in keyof K]: K[I] extends CursorKind ? CursorValue<K[I]> : never };

/** Bytes a PAGE_TOKEN_KEY must have at least (the HMAC-SHA256 block is 64; its output 32). */
export const MIN_PAGE_TOKEN_KEY_BYTES = 32;

interface TokenBody {
  q: string; // query fingerprint
  p: Position;
  s: string; // HMAC of q and p under the server's key
}

export class PageTokens {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length < MIN_PAGE_TOKEN_KEY_BYTES) throw new Error(`a page token key needs at least ${MIN_PAGE_TOKEN_KEY_BYTES} bytes`);
    this.#key = Buffer.from(key);
  }

  encode(query: TokenQuery, position: Position): string {
    return this.#encodeBody(fingerprint(query), position);
  }

  /** The position of a token issued by encode() for the same query, checked against `kinds`. */
  decode<const K extends readonly CursorKind[]>(token: string, query: TokenQuery, kinds: K): Cursor<K> {
    let body: TokenBody;
    try {
      body = parseJson(Buffer.from(token, 'base64url').toString('utf8')) as TokenBody;
    } catch {
      throw invalidToken('it is not a token this service issued');
    }
    const wellFormed =
      body !== null &&
      typeof body === 'object' &&
      typeof body.q === 'string' &&
      typeof body.s === 'string' &&
      Array.isArray(body.p) &&
      body.p.every((item) => typeof item === 'string' || typeof item === 'number') &&
      sameText(body.s, this.#signature(body.q, body.p)) &&
      this.#encodeBody(body.q, body.p) === token;
    if (!wellFormed) throw invalidToken('it is not a token this service issued');
    if (body.q !== fingerprint(query)) throw invalidToken('it was issued for a query with other filters or order');
    if (!matchesKinds(body.p, kinds)) throw invalidToken('it is not a token of this list');
    return body.p as Cursor<K>;
  }

  #signature(q: string, p: Position): string {
    return createHmac('sha256', this.#key).update(`${q}|${canonicalJson(p)}`).digest().subarray(0, 16).toString('base64url');
  }

  #encodeBody(q: string, position: Position): string {
    const body: TokenBody = { q, p: position, s: this.#signature(q, position) };
    return Buffer.from(JSON.stringify(body)).toString('base64url');
  }
}

function fingerprint(query: Record<string, unknown>): string {
  return sha256(canonicalJson(query)).subarray(0, 12).toString('base64url');
}

function sameText(a: string, b: string): boolean {
  const [left, right] = [Buffer.from(a), Buffer.from(b)];
  return left.length === right.length && timingSafeEqual(left, right);
}

function matchesKinds(position: Position, kinds: readonly CursorKind[]): boolean {
  return position.length === kinds.length && position.every((value, index) => isKind(value, kinds[index]!));
}

function isKind(value: string | number, kind: CursorKind): boolean {
  switch (kind) {
    case 'seq':
      return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
    case 'id':
      return typeof value === 'string' && value.length > 0;
    case 'time': {
      if (typeof value !== 'string') return false;
      const time = new Date(value);
      // Only the spelling toISOString() issues: `Tue Dec 01 2026` parses but was never issued.
      return !Number.isNaN(time.getTime()) && time.toISOString() === value;
    }
  }
}

function invalidToken(why: string): AppError {
  return new AppError('InvalidParameter.PageToken', `pageToken is invalid: ${why}.`, {
    details: { issues: [{ field: 'pageToken', message: why }] },
  });
}
