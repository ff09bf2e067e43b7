// Bearer authentication (docs/design.md §2): every /v1 request needs `Bearer <secretId>.<secretKey>`; every
// failure is the same 401 AuthFailure, which never repeats the secret it was given.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecretKey, issueCredential } from '../../src/modules/accounts/credentials.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const ROUTE = '/v1/spaces';

async function expectAuthFailure(headers: Record<string, string>, presentedSecret?: string): Promise<void> {
  const res = await t.request({ method: 'GET', url: ROUTE, token: null, headers });
  expect(res.statusCode).toBe(401);
  const body = res.json();
  expect(body).toEqual({ error: { code: 'AuthFailure', message: expect.any(String), requestId: expect.any(String) } });
  expect(body.error.requestId).toBe(res.headers['x-request-id']);
  if (presentedSecret) expect(res.body).not.toContain(presentedSecret);
}

describe('authentication', () => {
  it('accepts the root token of the account', async () => {
    const res = await t.request({ method: 'GET', url: ROUTE });
    expect(res.statusCode).toBe(200);
  });

  it('accepts the scheme name in any case', async () => {
    const res = await t.request({ method: 'GET', url: ROUTE, token: null, headers: { authorization: `bearer ${t.account.rootCredential.token}` } });
    expect(res.statusCode).toBe(200);
  });

  it('rejects a request without an Authorization header', async () => {
    await expectAuthFailure({});
  });

  it('rejects another scheme', async () => {
    const { token, secretKey } = t.account.rootCredential;
    await expectAuthFailure({ authorization: `Basic ${Buffer.from(token).toString('base64')}` });
    await expectAuthFailure({ authorization: `Token ${token}` }, secretKey);
  });

  it.each([
    ['an empty bearer', 'Bearer '],
    ['a bare secretId', `Bearer AKID${'a'.repeat(32)}`],
    ['a short key', `Bearer AKID${'a'.repeat(32)}.short-secret-value`],
    ['two tokens', `Bearer AKID${'a'.repeat(32)}.${'b'.repeat(43)} extra`],
  ])('rejects a malformed token: %s', async (_why, authorization) => {
    await expectAuthFailure({ authorization }, authorization.includes('short-secret-value') ? 'short-secret-value' : undefined);
  });

  it('rejects an unknown secretId', async () => {
    const stranger = issueCredential();
    await expectAuthFailure({ authorization: `Bearer ${stranger.token}` }, stranger.secretKey);
  });

  it('rejects the right secretId with a wrong key', async () => {
    const wrongKey = issueCredential().secretKey;
    await expectAuthFailure({ authorization: `Bearer ${t.account.rootCredential.secretId}.${wrongKey}` }, wrongKey);
  });

  it('rejects a disabled credential, and gives the same answer as for an unknown one', async () => {
    const other = await t.createAccount();
    const { secretId, secretKey, token } = other.rootCredential;
    expect((await t.request({ method: 'GET', url: ROUTE, token })).statusCode).toBe(200);

    await t.db.updateTable('credentials').set({ status: 'disabled' }).where('secret_id', '=', secretId).execute();
    await t.credentialChangesApplied(); // a direct write reaches the credential cache by NOTIFY
    await expectAuthFailure({ authorization: `Bearer ${token}` }, secretKey);

    const disabled = await t.request({ method: 'GET', url: ROUTE, token });
    const unknown = await t.request({ method: 'GET', url: ROUTE, token: issueCredential().token });
    expect(disabled.json().error.message).toBe(unknown.json().error.message);
  });

  it('stores only a 32-byte SHA-256 hash of the secret key', async () => {
    const { secretId, secretKey } = t.account.rootCredential;
    const row = await t.db.selectFrom('credentials').selectAll().where('secret_id', '=', secretId).executeTakeFirstOrThrow();
    expect(row.account_id).toBe(t.account.accountId);
    expect(row.secret_hash).toHaveLength(32);
    expect(row.secret_hash.equals(hashSecretKey(secretKey))).toBe(true);

    // No column, in any text form PostgreSQL can give, holds the key.
    const asText = await sql<{ text: string }>`SELECT c::text AS text FROM credentials c WHERE secret_id = ${secretId}`.execute(t.db);
    expect(asText.rows[0]?.text).not.toContain(secretKey);
    expect(asText.rows[0]?.text).not.toContain(Buffer.from(secretKey).toString('hex'));
  });
});
