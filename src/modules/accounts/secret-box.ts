// Encrypted copy of a secret key for the later signature-based authentication (TC3-HMAC-SHA256
// needs the secret itself). AES-256-GCM under the server's master key; the stored layout is
// iv (12 bytes) ‖ auth tag (16 bytes) ‖ ciphertext. No I/O.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const ALGORITHM = 'aes-256-gcm';
const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

function assertKey(masterKey: Buffer): void {
  if (masterKey.length !== KEY_BYTES) throw new Error(`the credential master key must be ${KEY_BYTES} bytes, not ${masterKey.length}`);
}

/** A fresh random IV per secret: GCM must never reuse an IV under the same key. */
export function encryptSecret(masterKey: Buffer, secretKey: string): Buffer {
  assertKey(masterKey);
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv(ALGORITHM, masterKey, iv, { authTagLength: TAG_BYTES });
  const ciphertext = Buffer.concat([cipher.update(secretKey, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
}

/** Throws when the key is wrong or the stored bytes were altered (GCM authenticates them). */
export function decryptSecret(masterKey: Buffer, sealed: Buffer): string {
  assertKey(masterKey);
  if (sealed.length < IV_BYTES + TAG_BYTES) throw new Error('the encrypted secret is too short');
  const iv = sealed.subarray(0, IV_BYTES);
  const tag = sealed.subarray(IV_BYTES, IV_BYTES + TAG_BYTES);
  const decipher = createDecipheriv(ALGORITHM, masterKey, iv, { authTagLength: TAG_BYTES });
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(sealed.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}
