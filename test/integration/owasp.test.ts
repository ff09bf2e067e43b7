// The OWASP API Security Top 10 items that apply to this service (issue 3):
//   API1 broken object-level authorization: another account's ids in paths and in list filters;
//   API2 broken authentication: deleted, disabled and wrong credentials;
//   API3 broken object property level authorization: mass assignment of server-owned fields, and
//        no secret in responses;
//   API4 unrestricted resource consumption: page sizes, filter counts, body size, batch size,
//        rate limit per credential.
// Function-level authorization (API5) is the permission matrix (permission-matrix.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';
import { databaseSnapshot, fullAccessOn, insertSubAccount, readOnlyOn } from '../support/principals.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

interface SessionRef {
  spaceId: string;
  userId: string;
  sessionId: string;
  eventId: string;
}

let t: TestApp;
let them: CreatedAccount; // another tenant of the same service
let ours: SessionRef;
let theirs: SessionRef;

const sessionUrl = (s: SessionRef) => `/v1/spaces/${s.spaceId}/users/${s.userId}/sessions/${s.sessionId}`;

/** A space with one session holding one event, made through the API with `token`. */
async function makeSession(token: string, names: { space: string; userId: string; sessionId: string; eventId: string }): Promise<SessionRef> {
  const space = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: names.space }, token });
  expect(space.statusCode, space.body).toBe(201);
  const ref: SessionRef = { spaceId: space.json().spaceId, userId: names.userId, sessionId: names.sessionId, eventId: names.eventId };
  const session = await t.request({ method: 'POST', url: `/v1/spaces/${ref.spaceId}/users/${ref.userId}/sessions`, payload: { sessionId: ref.sessionId }, token });
  expect(session.statusCode, session.body).toBe(201);
  const event = await t.request({ method: 'POST', url: `${sessionUrl(ref)}/events`, payload: { eventId: ref.eventId, author: 'user' }, token });
  expect(event.statusCode, event.body).toBe(201);
  return ref;
}

beforeAll(async () => {
  t = await createTestApp();
  them = await t.createAccount();
  ours = await makeSession(t.account.rootCredential.token, { space: 'ours', userId: 'alice', sessionId: 'our-session', eventId: 'our-event' });
  theirs = await makeSession(them.rootCredential.token, { space: 'theirs', userId: 'bob', sessionId: 'their-session', eventId: 'their-event' });
});
afterAll(async () => t?.close());

/** Sends the request (as our root unless a token is given), checks status and code, and that nothing changed. */
async function expectRefused(
  request: { method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE'; url: string; payload?: unknown; token?: string | null },
  status: number,
  code: string,
) {
  const before = await databaseSnapshot(t.db);
  const res = await t.request(request as Parameters<TestApp['request']>[0]);
  expect(res.statusCode, res.body).toBe(status);
  const error = res.json().error as { code: string; message: string; details?: { issues?: { field: string; message: string }[] } };
  expect(error.code).toBe(code);
  expect(await databaseSnapshot(t.db)).toEqual(before);
  return error;
}

describe('API1 object-level authorization: another account\'s ids', () => {
  type Probe = { method: 'GET' | 'POST' | 'PATCH' | 'DELETE'; url: string; payload?: Record<string, unknown> };
  const space = (s: SessionRef) => `/v1/spaces/${s.spaceId}`;
  const THEIR_PATHS: [string, (s: SessionRef) => Probe][] = [
    ['GET space', (s) => ({ method: 'GET', url: space(s) })],
    ['PATCH space', (s) => ({ method: 'PATCH', url: space(s), payload: { name: 'hijacked' } })],
    ['DELETE space', (s) => ({ method: 'DELETE', url: space(s) })],
    ['GET users', (s) => ({ method: 'GET', url: `${space(s)}/users` })],
    ['GET space sessions', (s) => ({ method: 'GET', url: `${space(s)}/sessions` })],
    ['POST session', (s) => ({ method: 'POST', url: `${space(s)}/users/${s.userId}/sessions`, payload: { sessionId: 'planted' } })],
    ['GET user sessions', (s) => ({ method: 'GET', url: `${space(s)}/users/${s.userId}/sessions` })],
    ['GET session', (s) => ({ method: 'GET', url: sessionUrl(s) })],
    ['PATCH session', (s) => ({ method: 'PATCH', url: sessionUrl(s), payload: { title: 'hijacked' } })],
    ['DELETE session', (s) => ({ method: 'DELETE', url: sessionUrl(s) })],
    ['POST event', (s) => ({ method: 'POST', url: `${sessionUrl(s)}/events`, payload: { author: 'intruder' } })],
    ['GET events', (s) => ({ method: 'GET', url: `${sessionUrl(s)}/events` })],
    ['GET event', (s) => ({ method: 'GET', url: `${sessionUrl(s)}/events/${s.eventId}` })],
  ];

  it.each(THEIR_PATHS)('%s with their space id is 404 ResourceNotFound.SessionSpace, changing nothing', async (_name, build) => {
    await expectRefused(build(theirs), 404, 'ResourceNotFound.SessionSpace');
  });

  it('answers 404, not 403, to a sub-account whose policy names their space', async () => {
    // A policy can name any well-formed space id; it must not reach across accounts.
    const sub = await insertSubAccount(t.db, t.account.accountId, { statements: fullAccessOn(theirs.spaceId) });
    await expectRefused({ method: 'GET', url: sessionUrl(theirs), token: sub.credential.token }, 404, 'ResourceNotFound.SessionSpace');
    await expectRefused({ method: 'DELETE', url: sessionUrl(theirs), token: sub.credential.token }, 404, 'ResourceNotFound.SessionSpace');
    const list = await t.request({ method: 'GET', url: '/v1/spaces', token: sub.credential.token });
    expect(list.statusCode).toBe(200);
    expect(list.json().spaces).toEqual([]);
  });

  it('finds none of their sessions or events through our own space', async () => {
    const oursWithTheirIds = { ...ours, userId: theirs.userId, sessionId: theirs.sessionId };
    await expectRefused({ method: 'GET', url: sessionUrl(oursWithTheirIds) }, 404, 'ResourceNotFound.Session');
    await expectRefused({ method: 'GET', url: `${sessionUrl(ours)}/events/${theirs.eventId}` }, 404, 'ResourceNotFound.Event');
  });

  it('returns nothing of theirs through list filters on our own space', async () => {
    const base = `/v1/spaces/${ours.spaceId}/sessions`;
    for (const query of [
      `?userId=${theirs.userId}&sessionId=${theirs.sessionId}`,
      `?sessionId=${theirs.sessionId}`,
      `?userId=${theirs.userId}`,
      `?userId=${ours.userId}&userId=${theirs.userId}&sessionId=${ours.sessionId}&sessionId=${theirs.sessionId}&includeTotal=true`,
    ]) {
      const res = await t.request({ method: 'GET', url: `${base}${query}` });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json() as { sessions: { sessionId: string; spaceId: string }[]; totalCount?: number };
      expect(body.sessions.filter((s) => s.spaceId !== ours.spaceId || s.sessionId === theirs.sessionId)).toEqual([]);
      if (body.totalCount !== undefined) expect(body.totalCount).toBe(body.sessions.length);
    }
    const users = await t.request({ method: 'GET', url: `/v1/spaces/${ours.spaceId}/users` });
    expect(users.json().users.map((u: { userId: string }) => u.userId)).toEqual([ours.userId]);
    const spaces = await t.request({ method: 'GET', url: `/v1/spaces?name=theirs&includeTotal=true` });
    expect(spaces.json()).toMatchObject({ spaces: [], totalCount: 0 });
  });

  it('answers 404 for their sub-accounts and credentials, and their root credential keeps working', async () => {
    const theirSub = await insertSubAccount(t.db, them.accountId, { statements: readOnlyOn(theirs.spaceId) });
    const sub = `/v1/iam/subaccounts/${theirSub.principalId}`;
    await expectRefused({ method: 'GET', url: sub }, 404, 'ResourceNotFound.SubAccount');
    await expectRefused({ method: 'DELETE', url: sub }, 404, 'ResourceNotFound.SubAccount');
    await expectRefused({ method: 'GET', url: `${sub}/policy` }, 404, 'ResourceNotFound.SubAccount');
    await expectRefused({ method: 'PUT', url: `${sub}/policy`, payload: { statements: fullAccessOn(ours.spaceId) } }, 404, 'ResourceNotFound.SubAccount');
    await expectRefused({ method: 'GET', url: `${sub}/credentials` }, 404, 'ResourceNotFound.SubAccount');
    await expectRefused({ method: 'POST', url: `${sub}/credentials` }, 404, 'ResourceNotFound.SubAccount');
    for (const secretId of [them.rootCredential.secretId, theirSub.credential.secretId]) {
      await expectRefused({ method: 'PATCH', url: `/v1/iam/credentials/${secretId}`, payload: { status: 'disabled' } }, 404, 'ResourceNotFound.Credential');
      await expectRefused({ method: 'DELETE', url: `/v1/iam/credentials/${secretId}` }, 404, 'ResourceNotFound.Credential');
    }
    const listed = await t.request({ method: 'GET', url: '/v1/iam/subaccounts?pageSize=100' });
    expect(listed.json().subAccounts.map((s: { subAccountId: string }) => s.subAccountId)).not.toContain(theirSub.principalId);
    const creds = await t.request({ method: 'GET', url: '/v1/iam/credentials' });
    expect(JSON.stringify(creds.json())).not.toContain(them.rootCredential.secretId);
    const stillWorks = await t.request({ method: 'GET', url: '/v1/spaces', token: them.rootCredential.token });
    expect(stillWorks.statusCode).toBe(200);
  });
});

describe('API2 broken authentication', () => {
  const probe = (token: string | null) => t.request({ method: 'GET', url: `/v1/spaces/${ours.spaceId}`, token });

  it('refuses the token of a sub-account deleted through the IAM API', async () => {
    const created = await t.request({ method: 'POST', url: '/v1/iam/subaccounts', payload: { name: 'short-lived' } });
    expect(created.statusCode, created.body).toBe(201);
    const sub = `/v1/iam/subaccounts/${created.json().subAccountId}`;
    const policy = await t.request({ method: 'PUT', url: `${sub}/policy`, payload: { statements: readOnlyOn(ours.spaceId) } });
    expect(policy.statusCode, policy.body).toBe(200);
    const credential = await t.request({ method: 'POST', url: `${sub}/credentials` });
    expect(credential.statusCode, credential.body).toBe(201);
    const token = credential.json().token as string;
    expect((await probe(token)).statusCode).toBe(200);

    expect((await t.request({ method: 'DELETE', url: sub })).statusCode).toBe(204);
    const after = await probe(token);
    expect(after.statusCode).toBe(401);
    expect(after.json().error.code).toBe('AuthFailure');
  });

  it('refuses the token of a sub-account removed from the database', async () => {
    const sub = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(ours.spaceId) });
    expect((await probe(sub.credential.token)).statusCode).toBe(200);
    await t.db.deleteFrom('principals').where('account_id', '=', sub.accountId).where('principal_id', '=', sub.principalId).execute();
    await t.credentialChangesApplied(); // a direct write reaches the credential cache by NOTIFY
    expect((await probe(sub.credential.token)).statusCode).toBe(401);
  });

  it('refuses a disabled credential at once, accepts it again when re-enabled, and refuses a deleted one', async () => {
    const sub = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(ours.spaceId) });
    const url = `/v1/iam/credentials/${sub.credential.secretId}`;
    expect((await probe(sub.credential.token)).statusCode).toBe(200);
    expect((await t.request({ method: 'PATCH', url, payload: { status: 'disabled' } })).statusCode).toBe(200);
    expect((await probe(sub.credential.token)).statusCode).toBe(401);
    expect((await t.request({ method: 'PATCH', url, payload: { status: 'enabled' } })).statusCode).toBe(200);
    expect((await probe(sub.credential.token)).statusCode).toBe(200);
    expect((await t.request({ method: 'DELETE', url })).statusCode).toBe(204);
    expect((await probe(sub.credential.token)).statusCode).toBe(401);
  });

  it('applies a changed policy from the next request on', async () => {
    const sub = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(ours.spaceId) });
    expect((await probe(sub.credential.token)).statusCode).toBe(200);
    const put = await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${sub.principalId}/policy`, payload: { statements: readOnlyOn(theirs.spaceId) } });
    expect(put.statusCode, put.body).toBe(200);
    expect((await probe(sub.credential.token)).statusCode).toBe(403);
  });

  it('answers a wrong key, an unknown id and a disabled credential alike (no oracle)', async () => {
    const sub = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(ours.spaceId) });
    const { secretId, secretKey } = sub.credential;
    const wrongKey = `${secretId}.${secretKey.slice(0, -1)}${secretKey.endsWith('A') ? 'B' : 'A'}`;
    const unknownId = `AKID${'x'.repeat(32)}.${secretKey}`;
    const wrong = await probe(wrongKey);
    const unknown = await probe(unknownId);
    await t.request({ method: 'PATCH', url: `/v1/iam/credentials/${secretId}`, payload: { status: 'disabled' } });
    const disabled = await probe(sub.credential.token);
    for (const res of [wrong, unknown, disabled]) {
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('AuthFailure');
      expect(res.json().error.message).toBe(wrong.json().error.message);
      expect(res.body).not.toContain(secretKey);
    }
  });

  it.each([
    ['no scheme', (token: string) => token],
    ['Basic scheme', (token: string) => `Basic ${Buffer.from(token).toString('base64')}`],
    ['only the secretId', (token: string) => `Bearer ${token.split('.')[0]}`],
    ['an empty key', (token: string) => `Bearer ${token.split('.')[0]}.`],
  ])('refuses a malformed Authorization header (%s)', async (_name, header) => {
    const res = await t.request({ method: 'GET', url: '/v1/spaces', token: null, headers: { authorization: header(t.account.rootCredential.token) } });
    expect(res.statusCode).toBe(401);
    expect(res.json().error.code).toBe('AuthFailure');
  });
});

describe('API3 object property level authorization', () => {
  const session = () => sessionUrl(ours);
  type Target = { method: 'POST' | 'PATCH' | 'PUT'; url: () => string | Promise<string>; body: () => Record<string, unknown>; fields: string[] };

  // Server-owned fields in a body are unknown fields of a strict schema: 400 naming the field.
  const TARGETS: Record<string, Target> = {
    'POST /v1/spaces': { method: 'POST', url: () => '/v1/spaces', body: () => ({ name: 'n' }), fields: ['accountId', 'spaceId', 'default', 'createTime', 'updateTime'] },
    'PATCH /v1/spaces/{spaceId}': {
      method: 'PATCH',
      url: () => `/v1/spaces/${ours.spaceId}`,
      body: () => ({ name: 'n' }),
      fields: ['accountId', 'spaceId', 'default', 'createTime'],
    },
    'POST …/sessions': {
      method: 'POST',
      url: () => `/v1/spaces/${ours.spaceId}/users/${ours.userId}/sessions`,
      body: () => ({ sessionId: 'mass-assigned' }),
      fields: ['accountId', 'spaceId', 'userId', 'revision', 'eventCount', 'createTime', 'updateTime'],
    },
    'PATCH …/sessions/{sessionId}': {
      method: 'PATCH',
      url: session,
      body: () => ({ title: 'x' }),
      fields: ['accountId', 'spaceId', 'userId', 'sessionId', 'revision', 'eventCount', 'createTime', 'state'],
    },
    'POST …/events': { method: 'POST', url: () => `${session()}/events`, body: () => ({ author: 'user' }), fields: ['accountId', 'spaceId', 'sessionId', 'seq', 'createTime'] },
    'POST /v1/iam/subaccounts': { method: 'POST', url: () => '/v1/iam/subaccounts', body: () => ({ name: 'n' }), fields: ['accountId', 'subAccountId', 'kind', 'createTime'] },
    'PUT …/policy': {
      method: 'PUT',
      url: async () => `/v1/iam/subaccounts/${(await insertSubAccount(t.db, t.account.accountId)).principalId}/policy`,
      body: () => ({ statements: readOnlyOn(ours.spaceId) }),
      fields: ['accountId', 'principalId', 'updateTime'],
    },
  };

  it.each(Object.entries(TARGETS).flatMap(([name, target]) => target.fields.map((field) => [name, field] as const)))(
    '%s with %s is 400 InvalidParameter naming it, and writes nothing',
    async (name, field) => {
      const target = TARGETS[name]!;
      const url = await target.url();
      const payload = { ...target.body(), [field]: field === 'default' ? true : 'forged' };
      const error = await expectRefused({ method: target.method, url, payload }, 400, 'InvalidParameter');
      expect(error.message).toContain(field);
      expect(JSON.stringify(error.details?.issues)).toContain(field);
    },
  );

  it('rejects seq in an event of a batch, naming its position', async () => {
    const error = await expectRefused(
      { method: 'POST', url: `${session()}/events`, payload: { events: [{ author: 'user' }, { author: 'user', seq: 1 }] } },
      400,
      'InvalidParameter',
    );
    expect(JSON.stringify(error.details?.issues)).toContain('events[1]');
    expect(error.message).toContain('seq');
  });

  it('never shows a secret key or its hash in credential lists', async () => {
    const sub = await insertSubAccount(t.db, t.account.accountId);
    for (const url of ['/v1/iam/credentials', `/v1/iam/subaccounts/${sub.principalId}/credentials`]) {
      const res = await t.request({ method: 'GET', url });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.body).not.toMatch(/secretKey|secretHash|secret_hash|token/);
      expect(res.body).not.toContain(t.account.rootCredential.secretKey);
      expect(res.body).not.toContain(sub.credential.secretKey);
    }
  });
});

describe('API4 unrestricted resource consumption', () => {
  const spaceSessions = () => `/v1/spaces/${ours.spaceId}/sessions`;
  const many = (name: string, count: number) => Array.from({ length: count }, (_, i) => `${name}=v${i}`).join('&');

  it.each([
    ['/v1/spaces', 100],
    ['SPACE_SESSIONS', 100],
    ['USER_SESSIONS', 100],
    ['EVENTS', 200],
    ['/v1/iam/subaccounts', 100],
  ])('caps pageSize of %s at %i', async (which, max) => {
    const base =
      which === 'SPACE_SESSIONS'
        ? spaceSessions()
        : which === 'USER_SESSIONS'
          ? `/v1/spaces/${ours.spaceId}/users/${ours.userId}/sessions`
          : which === 'EVENTS'
            ? `${sessionUrl(ours)}/events`
            : which;
    expect((await t.request({ method: 'GET', url: `${base}?pageSize=${max}` })).statusCode).toBe(200);
    const error = await expectRefused({ method: 'GET', url: `${base}?pageSize=${max + 1}` }, 400, 'InvalidParameter');
    expect(JSON.stringify(error.details?.issues)).toContain('pageSize');
  });

  it.each(['userId', 'sessionId', 'metadata'])('accepts 100 values of the %s filter and refuses 101', async (filter) => {
    const values = (count: number) => (filter === 'metadata' ? Array.from({ length: count }, (_, i) => `metadata=k=v${i}`).join('&') : many(filter, count));
    const ok = await t.request({ method: 'GET', url: `${spaceSessions()}?${values(DEFAULT_LIMITS.filterValues)}` });
    expect(ok.statusCode, ok.body).toBe(200);
    const error = await expectRefused({ method: 'GET', url: `${spaceSessions()}?${values(DEFAULT_LIMITS.filterValues + 1)}` }, 400, 'InvalidParameter');
    expect(JSON.stringify(error.details?.issues)).toContain(filter);
  });

  it('counts metadata values per key, as each key is a filter of its own: two keys of 100 values each are taken', async () => {
    const values = (key: string, count: number) => Array.from({ length: count }, (_, i) => `metadata=${key}=v${i}`);
    const ok = await t.request({ method: 'GET', url: `${spaceSessions()}?${[...values('a', 100), ...values('b', 100)].join('&')}` });
    expect(ok.statusCode, ok.body).toBe(200);
    const error = await expectRefused({ method: 'GET', url: `${spaceSessions()}?${[...values('a', 100), ...values('b', 101)].join('&')}` }, 400, 'InvalidParameter');
    expect(error.details?.issues).toEqual([{ field: 'metadata', message: 'at most 100 values per key (key "b")' }]);
  });

  it('accepts 10 combined filters and refuses 11', async () => {
    const filters = (metadataKeys: number) =>
      [
        `userId=${ours.userId}`,
        `sessionId=${ours.sessionId}`,
        'title=x',
        'updatedAfter=2020-01-01T00:00:00.000Z',
        'updatedBefore=2999-01-01T00:00:00.000Z',
        ...Array.from({ length: metadataKeys }, (_, i) => `metadata=key${i}=v`),
      ].join('&');
    expect((await t.request({ method: 'GET', url: `${spaceSessions()}?${filters(DEFAULT_LIMITS.filters - 5)}` })).statusCode).toBe(200);
    await expectRefused({ method: 'GET', url: `${spaceSessions()}?${filters(DEFAULT_LIMITS.filters - 4)}` }, 400, 'InvalidParameter');
  });

  it.each([
    ['POST /v1/spaces', 'POST', (): string => '/v1/spaces', (big: string) => ({ name: 'big', description: big })],
    ['POST …/events', 'POST', (): string => `${sessionUrl(ours)}/events`, (big: string) => ({ author: 'user', content: { parts: [{ text: big }] } })],
    ['PUT …/policy', 'PUT', (): string => '/v1/iam/subaccounts/sub-00000000-0000-4000-8000-000000000000/policy', (big: string) => ({ statements: [], padding: big })],
  ] as const)('answers a body over 1 MiB on %s with 413 LimitExceeded.RequestSize', async (_name, method, urlOf, body) => {
    const payload = JSON.stringify(body('x'.repeat(DEFAULT_LIMITS.bodyBytes + 1)));
    const before = await databaseSnapshot(t.db);
    const res = await t.request({ method, url: urlOf(), payload, headers: { 'content-type': 'application/json' } });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('LimitExceeded.RequestSize');
    expect(await databaseSnapshot(t.db)).toEqual(before);
  });

  it('appends a batch of 100 events and refuses 101 without writing any', async () => {
    const batch = (count: number, prefix: string) => ({ events: Array.from({ length: count }, (_, i) => ({ eventId: `${prefix}-${i}`, author: 'user' })) });
    const error = await expectRefused({ method: 'POST', url: `${sessionUrl(ours)}/events`, payload: batch(DEFAULT_LIMITS.batchEvents + 1, 'over') }, 400, 'InvalidParameter');
    expect(JSON.stringify(error.details?.issues)).toContain('events');
    const ok = await t.request({ method: 'POST', url: `${sessionUrl(ours)}/events`, payload: batch(DEFAULT_LIMITS.batchEvents, 'max') });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json().events).toHaveLength(DEFAULT_LIMITS.batchEvents);
  });

  it('limits each credential on its own, answering 429 with Retry-After', async () => {
    const limited = await createTestApp({ limits: { rateLimitMax: 3, rateLimitWindowMs: 60_000 } });
    try {
      const other = await insertSubAccount(limited.db, limited.account.accountId, { statements: readOnlyOn(limited.account.defaultSpaceId) });
      for (let i = 0; i < 3; i++) expect((await limited.request({ method: 'GET', url: '/v1/spaces' })).statusCode).toBe(200);
      const refused = await limited.request({ method: 'GET', url: '/v1/spaces' });
      expect(refused.statusCode).toBe(429);
      expect(refused.json().error.code).toBe('RequestLimitExceeded');
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      // Another credential of the same account still has its own budget.
      expect((await limited.request({ method: 'GET', url: '/v1/spaces', token: other.credential.token })).statusCode).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
