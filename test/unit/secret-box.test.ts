import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { generateSecretKey } from '../../src/modules/accounts/credentials.js';
import { decryptSecret, encryptSecret } from '../../src/modules/accounts/secret-box.js';

describe('secret box (AES-256-GCM)', () => {
  const masterKey = randomBytes(32);

  it('decrypts what it encrypted, in the layout iv(12) ‖ tag(16) ‖ ciphertext', () => {
    const secret = generateSecretKey();
    const sealed = encryptSecret(masterKey, secret);
    expect(sealed).toHaveLength(12 + 16 + Buffer.byteLength(secret));
    expect(sealed.includes(Buffer.from(secret))).toBe(false);
    expect(decryptSecret(masterKey, sealed)).toBe(secret);
  });

  it('fails with another master key', () => {
    const sealed = encryptSecret(masterKey, generateSecretKey());
    expect(() => decryptSecret(randomBytes(32), sealed)).toThrow();
  });

  it('fails when the ciphertext, the tag or the iv was altered', () => {
    const sealed = encryptSecret(masterKey, generateSecretKey());
    for (const index of [0, 12, sealed.length - 1]) {
      const tampered = Buffer.from(sealed);
      tampered[index] = tampered[index]! ^ 0x01;
      expect(() => decryptSecret(masterKey, tampered), `byte ${index}`).toThrow();
    }
    expect(() => decryptSecret(masterKey, sealed.subarray(0, 20))).toThrow();
  });

  it('uses a distinct iv for every encryption of the same secret', () => {
    const secret = generateSecretKey();
    const sealed = Array.from({ length: 50 }, () => encryptSecret(masterKey, secret));
    expect(new Set(sealed.map((s) => s.subarray(0, 12).toString('hex'))).size).toBe(50);
    expect(new Set(sealed.map((s) => s.toString('hex'))).size).toBe(50);
  });

  it('refuses a master key that is not 32 bytes', () => {
    expect(() => encryptSecret(randomBytes(16), 'x')).toThrow(/32 bytes/);
  });
});
