import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateSecretId, generateSecretKey, hashSecretKey, issueCredential, parseToken, secretKeyMatches } from '../../src/modules/accounts/credentials.js';

describe('credentials', () => {
  it('issues a secretId of AKID and 32 base62 characters', () => {
    for (let i = 0; i < 50; i++) expect(generateSecretId()).toMatch(/^AKID[A-Za-z0-9]{32}$/);
  });

  it('issues a secretKey of at least 256 bits as URL-safe base64url characters', () => {
    for (let i = 0; i < 50; i++) {
      const key = generateSecretKey();
      expect(key).toMatch(/^[A-Za-z0-9_-]{43,}$/);
      // 43 base64url characters decode to 32 bytes: the full 256 bits of randomness.
      expect(Buffer.from(key, 'base64url')).toHaveLength(32);
    }
  });

  it('never issues the same credential twice', () => {
    const issued = Array.from({ length: 200 }, () => issueCredential());
    expect(new Set(issued.map((c) => c.secretId)).size).toBe(200);
    expect(new Set(issued.map((c) => c.secretKey)).size).toBe(200);
  });

  it('answers the ready-made bearer token <secretId>.<secretKey>', () => {
    const credential = issueCredential();
    expect(credential.token).toBe(`${credential.secretId}.${credential.secretKey}`);
    expect(parseToken(credential.token)).toEqual({ secretId: credential.secretId, secretKey: credential.secretKey });
  });

  it('hashes the key with SHA-256: 32 bytes that are not the key', () => {
    const { secretKey } = issueCredential();
    const hash = hashSecretKey(secretKey);
    expect(hash).toHaveLength(32);
    expect(hash.equals(createHash('sha256').update(secretKey).digest())).toBe(true);
    expect(hash.toString('utf8')).not.toContain(secretKey);
    expect(hash.toString('base64url')).not.toBe(secretKey);
  });

  it('matches the right key against the stored hash and rejects any other', () => {
    const { secretKey } = issueCredential();
    const stored = hashSecretKey(secretKey);
    expect(secretKeyMatches(stored, secretKey)).toBe(true);
    expect(secretKeyMatches(stored, generateSecretKey())).toBe(false);
    expect(secretKeyMatches(stored, secretKey.slice(0, -1))).toBe(false);
    expect(secretKeyMatches(stored, '')).toBe(false);
    expect(secretKeyMatches(Buffer.alloc(0), secretKey)).toBe(false);
  });

  it('rejects a stored hash that differs from the key\'s in any one bit, or is longer or shorter', () => {
    const { secretKey } = issueCredential();
    const stored = hashSecretKey(secretKey);
    for (let bit = 0; bit < stored.length * 8; bit++) {
      const changed = Buffer.from(stored);
      changed[bit >> 3]! ^= 1 << (bit & 7);
      expect(secretKeyMatches(changed, secretKey)).toBe(false);
    }
    expect(secretKeyMatches(Buffer.concat([stored, Buffer.from([0])]), secretKey)).toBe(false);
    expect(secretKeyMatches(stored.subarray(0, 31), secretKey)).toBe(false);
  });

  it.each([
    ['no dot', `AKID${'a'.repeat(32)}${'b'.repeat(43)}`],
    ['empty', ''],
    ['a short secretId', `AKID${'a'.repeat(31)}.${'b'.repeat(43)}`],
    ['a secretId without AKID', `AKIE${'a'.repeat(32)}.${'b'.repeat(43)}`],
    ['a non-base62 secretId', `AKID${'a'.repeat(31)}-.${'b'.repeat(43)}`],
    ['a short secretKey', `AKID${'a'.repeat(32)}.${'b'.repeat(42)}`],
    ['a secretKey with a non-URL-safe character', `AKID${'a'.repeat(32)}.${'b'.repeat(42)}+`],
    ['a second dot', `AKID${'a'.repeat(32)}.${'b'.repeat(43)}.x`],
    ['surrounding spaces', ` AKID${'a'.repeat(32)}.${'b'.repeat(43)}`],
  ])('rejects a token with %s', (_why, token) => {
    expect(parseToken(token)).toBeUndefined();
  });
});
