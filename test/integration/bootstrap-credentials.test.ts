// Credentials made outside the API (operator command, embedded start-up, pinned ROOT_API_KEY) follow
// the same hygiene as API-made ones: a hash, and an encrypted copy only when a master key is set.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccount, EMBEDDED_ACCOUNT_NAME, ensureEmbeddedAccount } from '../../src/modules/accounts/accounts.service.js';
import { hashSecretKey } from '../../src/modules/accounts/credentials.js';
import { decryptSecret } from '../../src/modules/accounts/secret-box.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase();
});
afterAll(async () => database.dispose());

const credentialRow = (secretId: string) =>
  database.db.selectFrom('credentials').select(['secret_hash', 'secret_encrypted']).where('secret_id', '=', secretId).executeTakeFirstOrThrow();

describe('bootstrap credentials', () => {
  it('store only a hash without a master key', async () => {
    const account = await createAccount(database.db, 'plain-bootstrap');
    const row = await credentialRow(account.rootCredential.secretId);
    expect(row.secret_hash.equals(hashSecretKey(account.rootCredential.secretKey))).toBe(true);
    expect(row.secret_encrypted).toBeNull();
  });

  it('also store an AES-256-GCM copy under the master key when one is set', async () => {
    const masterKey = randomBytes(32);
    const account = await createAccount(database.db, 'sealed-bootstrap', { masterKey });
    const row = await credentialRow(account.rootCredential.secretId);
    expect(row.secret_encrypted).not.toBeNull();
    expect(row.secret_encrypted!.includes(Buffer.from(account.rootCredential.secretKey))).toBe(false);
    expect(decryptSecret(masterKey, row.secret_encrypted!)).toBe(account.rootCredential.secretKey);
  });

  it('seal a pinned ROOT_API_KEY of the embedded account too', async () => {
    const masterKey = randomBytes(32);
    const secretId = 'AKID' + 'P'.repeat(32);
    const secretKey = randomBytes(32).toString('base64url');
    const created = await ensureEmbeddedAccount(database.db, { pinnedToken: `${secretId}.${secretKey}`, masterKey });
    expect(created?.name).toBe(EMBEDDED_ACCOUNT_NAME);
    // A second start re-installs the pinned key, still sealed.
    expect(await ensureEmbeddedAccount(database.db, { pinnedToken: `${secretId}.${secretKey}`, masterKey })).toBeUndefined();
    const row = await credentialRow(secretId);
    expect(decryptSecret(masterKey, row.secret_encrypted!)).toBe(secretKey);
  });
});
