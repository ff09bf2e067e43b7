// Credential material: generation, hashing and constant-time comparison. No I/O.
import { hash, randomBytes, randomInt } from 'node:crypto';
import { sha256 } from '../../lib/canonical-json.js';

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const SECRET_ID_PATTERN = /^AKID[A-Za-z0-9]{32}$/;
const SECRET_KEY_PATTERN = /^[A-Za-z0-9_-]{43,128}$/;

export interface IssuedCredential {
  secretId: string;
  secretKey: string;
  /** The ready-made bearer token `<secretId>.<secretKey>`. */
  token: string;
}

/** Whether `value` has the shape of a secretId this service issues (AKID and 32 base62 characters). */
export function isSecretId(value: string): boolean {
  return SECRET_ID_PATTERN.test(value);
}

export function generateSecretId(): string {
  let id = 'AKID';
  for (let i = 0; i < 32; i++) id += BASE62[randomInt(BASE62.length)];
  return id;
}

/** 32 random bytes (256 bits) as 43 base64url characters. */
export function generateSecretKey(): string {
  return randomBytes(32).toString('base64url');
}

export function issueCredential(): IssuedCredential {
  const secretId = generateSecretId();
  const secretKey = generateSecretKey();
  return { secretId, secretKey, token: `${secretId}.${secretKey}` };
}

/** SHA-256 of the key's UTF-8 bytes, one-shot: every authenticated request hashes the key it presents. */
export function hashSecretKey(secretKey: string): Buffer {
  return sha256(secretKey);
}

/**
 * Compares by hash, in constant time: the stored hash never meets the plain key byte by byte.
 * Every authenticated request runs this. The presented key's digest is asked of crypto.hash as 32
 * 'binary' (latin1) characters, one per byte, and compared in a loop that visits every byte whatever it finds,
 * as timingSafeEqual does: ~0.3 µs, where a Buffer digest and timingSafeEqual cost 0.9–1.3 (issue 24).
 */
export function secretKeyMatches(storedHash: Buffer, presentedKey: string): boolean {
  const presentedBytes = hash('sha256', presentedKey, 'binary');
  if (storedHash.length !== presentedBytes.length) return false;
  let difference = 0;
  for (let at = 0; at < presentedBytes.length; at++) difference |= storedHash[at]! ^ presentedBytes.charCodeAt(at);
  return difference === 0;
}

/** Splits `<secretId>.<secretKey>`; undefined when the token does not have that shape. */
export function parseToken(token: string): { secretId: string; secretKey: string } | undefined {
  const dot = token.indexOf('.');
  if (dot < 0) return undefined;
  const secretId = token.slice(0, dot);
  const secretKey = token.slice(dot + 1);
  if (!SECRET_ID_PATTERN.test(secretId) || !SECRET_KEY_PATTERN.test(secretKey)) return undefined;
  return { secretId, secretKey };
}
