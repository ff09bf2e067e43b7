// Rate limiting per credential: a bucket per verified secretId in the /v1 scope, 429
// RequestLimitExceeded with Retry-After when it is empty; health routes are never limited.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { upsertCredential } from '../../src/modules/accounts/accounts.repository.js';
import { ROOT_PRINCIPAL_ID } from '../../src/modules/accounts/index.js';
import { hashSecretKey, issueCredential, type IssuedCredential } from '../../src/modules/accounts/credentials.js';
import { insertSubAccount } from '../support/principals.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const MAX = 3;
// One limited app for the file; each test spends the bucket of a credential of its own.
let t: TestApp;
let unlimited: TestApp;
beforeAll(async () => {
  [t, unlimited] = await Promise.all([
    createTestApp({ limits: { rateLimitMax: MAX, rateLimitWindowMs: 60_000 } }),
    createTestApp({ limits: { rateLimitMax: 0 } }),
  ]);
});
afterAll(async () => {
  await Promise.all([t?.close(), unlimited?.close()]);
});

/** Another root credential of the account, inserted directly (the IAM API is not under test here). */
async function newRootCredential(app: TestApp): Promise<IssuedCredential> {
  const credential = issueCredential();
  await upsertCredential(app.db, {
    accountId: app.account.accountId,
    principalId: ROOT_PRINCIPAL_ID,
    secretId: credential.secretId,
    secretHash: hashSecretKey(credential.secretKey),
  });
  return credential;
}

const listSpaces = (app: TestApp, token: string) => app.request({ method: 'GET', url: '/v1/spaces', token });

describe('rate limiting per credential', () => {
  it('answers the request past the limit with 429 RequestLimitExceeded and Retry-After', async () => {
    const { token, secretKey } = await newRootCredential(t);
    for (let i = 0; i < MAX; i++) {
      const res = await listSpaces(t, token);
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe(String(MAX));
      expect(res.headers['x-ratelimit-remaining']).toBe(String(MAX - i - 1));
    }
    const refused = await listSpaces(t, token);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toEqual({
      error: { code: 'RequestLimitExceeded', message: expect.any(String), requestId: refused.headers['x-request-id'] },
    });
    const retryAfter = Number(refused.headers['retry-after']);
    expect(Number.isInteger(retryAfter)).toBe(true);
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(refused.body).not.toContain(secretKey);
  });

  it('refuses a write past the limit without applying it', async () => {
    const { token } = await newRootCredential(t);
    for (let i = 0; i < MAX; i++) expect((await listSpaces(t, token)).statusCode).toBe(200);
    const refused = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'over the limit' }, token });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe('RequestLimitExceeded');
    const spaces = await t.db.selectFrom('session_spaces').select('name').where('name', '=', 'over the limit').execute();
    expect(spaces).toEqual([]);
  });

  it('keeps a bucket per credential: another credential of the same account still passes', async () => {
    const first = await newRootCredential(t);
    const second = await newRootCredential(t);
    for (let i = 0; i < MAX; i++) expect((await listSpaces(t, first.token)).statusCode).toBe(200);
    expect((await listSpaces(t, first.token)).statusCode).toBe(429);
    const res = await listSpaces(t, second.token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-remaining']).toBe(String(MAX - 1));
  });

  it('does not let a wrong key spend the bucket of the secretId it names', async () => {
    const { secretId, token } = await newRootCredential(t);
    const forged = `${secretId}.${issueCredential().secretKey}`;
    for (let i = 0; i < MAX * 2; i++) {
      const res = await listSpaces(t, forged);
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('AuthFailure');
    }
    const res = await listSpaces(t, token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-remaining']).toBe(String(MAX - 1));
  });

  it('counts requests that fail validation or authorization', async () => {
    // A sub-account without a policy: every request on a space is a 403, yet each spends the bucket.
    const sub = await insertSubAccount(t.db, t.account.accountId);
    const url = `/v1/spaces/${t.account.defaultSpaceId}/sessions`;
    for (let i = 0; i < MAX - 1; i++) {
      const res = await t.request({ method: 'GET', url, token: sub.credential.token });
      expect(res.statusCode).toBe(403);
      expect(res.json().error.code).toBe('UnauthorizedOperation');
    }
    const invalid = await t.request({ method: 'GET', url: '/v1/spaces/not-a-space-id/sessions', token: sub.credential.token });
    expect(invalid.statusCode).toBe(400);
    const refused = await t.request({ method: 'GET', url, token: sub.credential.token });
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe('RequestLimitExceeded');
  });

  it('never limits the health routes', async () => {
    const { token } = await newRootCredential(t);
    for (let i = 0; i < MAX * 3; i++) {
      const live = await t.request({ method: 'GET', url: '/healthz', token: null });
      expect(live.statusCode).toBe(200);
      expect(live.headers['x-ratelimit-limit']).toBeUndefined();
      expect((await t.request({ method: 'GET', url: '/readyz', token })).statusCode).toBe(200);
    }
    expect((await listSpaces(t, token)).statusCode).toBe(200);
  });

  it('is off when RATE_LIMIT_MAX is 0', async () => {
    const { token } = await newRootCredential(unlimited);
    for (let i = 0; i < MAX * 5; i++) {
      const res = await listSpaces(unlimited, token);
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });

  it('refills the bucket when its window ends', async () => {
    const windowed = await createTestApp({ limits: { rateLimitMax: 2, rateLimitWindowMs: 1_000 } });
    try {
      const token = windowed.account.rootCredential.token;
      for (let i = 0; i < 2; i++) expect((await listSpaces(windowed, token)).statusCode).toBe(200);
      const refused = await listSpaces(windowed, token);
      expect(refused.statusCode).toBe(429);
      expect(refused.json().error.code).toBe('RequestLimitExceeded');
      const retryAfterS = Number(refused.headers['retry-after']);
      expect(retryAfterS).toBe(1);
      // Past Retry-After the window has ended: a full bucket again, and the next refusal after it.
      await new Promise((resolve) => setTimeout(resolve, retryAfterS * 1_000 + 100));
      const again = await listSpaces(windowed, token);
      expect(again.statusCode).toBe(200);
      expect(again.headers['x-ratelimit-remaining']).toBe('1');
      expect((await listSpaces(windowed, token)).statusCode).toBe(200);
      expect((await listSpaces(windowed, token)).statusCode).toBe(429);
    } finally {
      await windowed.close();
    }
  });
});
