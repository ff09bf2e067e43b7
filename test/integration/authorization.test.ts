// Authorization of sub-accounts (docs/design.md §2): every /v1 route is evaluated against the caller's
// policy per space; a refused request is 403 UnauthorizedOperation (404 for a space the account
// does not have) and changes nothing; the list of spaces shows only what the caller may describe.
// Sub-accounts are set up directly in the database, independent of the IAM API.
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registerAuthentication } from '../../src/http/auth.js';
import { registerAuthorization } from '../../src/http/authorization.js';
import { registerErrorHandling } from '../../src/http/error-handler.js';
import { upsertCredential } from '../../src/modules/accounts/accounts.repository.js';
import { authenticate } from '../../src/modules/accounts/accounts.service.js';
import { hashSecretKey, issueCredential } from '../../src/modules/accounts/credentials.js';
import type { PolicyStatementValue } from '../../src/lib/policy.js';
import { findSpaceOrThrow } from '../../src/modules/spaces/space-lookup.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let spaceA: string;
let spaceB: string;
let foreignSpace: string;

const USER = 'user-1';
const SESSION = 'session-1';
const sessionsUrl = (spaceId: string) => `/v1/spaces/${spaceId}/users/${USER}/sessions`;
const sessionUrl = (spaceId: string) => `${sessionsUrl(spaceId)}/${SESSION}`;
const eventsUrl = (spaceId: string) => `${sessionUrl(spaceId)}/events`;

interface SubAccount {
  principalId: string;
  token: string;
  secretKey: string;
}

/** A sub-account of `accountId` with the given policy (none: no policies row) and one credential. */
async function createSubAccount(statements: PolicyStatementValue[] | undefined, accountId = t.account.accountId): Promise<SubAccount> {
  const principalId = `sub-${randomUUID()}`;
  await t.db.insertInto('principals').values({ account_id: accountId, principal_id: principalId, kind: 'sub', name: principalId }).execute();
  if (statements) {
    await t.db.insertInto('policies').values({ account_id: accountId, principal_id: principalId, statements: JSON.stringify(statements) }).execute();
  }
  const credential = issueCredential();
  await upsertCredential(t.db, { accountId, principalId, secretId: credential.secretId, secretHash: hashSecretKey(credential.secretKey) });
  return { principalId, token: credential.token, secretKey: credential.secretKey };
}

/** Every row of tenant data, to prove that a refused request changed nothing. */
async function snapshot() {
  const [spaces, users, sessions, events] = await Promise.all([
    t.db.selectFrom('session_spaces').selectAll().orderBy('account_id').orderBy('space_id').execute(),
    t.db.selectFrom('space_users').selectAll().orderBy('account_id').orderBy('space_id').orderBy('user_id').execute(),
    t.db.selectFrom('sessions').selectAll().orderBy('account_id').orderBy('space_id').orderBy('session_id').execute(),
    t.db.selectFrom('events').selectAll().orderBy('account_id').orderBy('session_id').orderBy('seq').execute(),
  ]);
  return { spaces, users, sessions, events };
}

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

async function expectRefused(sub: SubAccount, method: Method, url: string, code: 'UnauthorizedOperation' | 'ResourceNotFound.SessionSpace', payload?: object) {
  const before = await snapshot();
  const res = await t.request({ method, url, token: sub.token, ...(payload ? { payload } : {}) });
  expect(res.statusCode, `${method} ${url}`).toBe(code === 'UnauthorizedOperation' ? 403 : 404);
  expect(res.json().error.code).toBe(code);
  expect(res.body).not.toContain(sub.secretKey);
  expect(await snapshot()).toEqual(before);
  return res;
}

beforeAll(async () => {
  t = await createTestApp();
  spaceA = await insertSpace(t.db, t.account.accountId, 'space A');
  spaceB = await insertSpace(t.db, t.account.accountId, 'space B');
  for (const spaceId of [spaceA, spaceB]) {
    await insertSession(t.db, { accountId: t.account.accountId, spaceId, userId: USER, sessionId: SESSION });
    const appended = await t.request({ method: 'POST', url: eventsUrl(spaceId), payload: { author: 'user', content: { role: 'user', parts: [{ text: 'hi' }] } } });
    expect(appended.statusCode).toBe(201);
  }
  const other = await t.createAccount();
  foreignSpace = other.defaultSpaceId;
  await insertSession(t.db, { accountId: other.accountId, spaceId: foreignSpace, userId: USER, sessionId: SESSION });
});
afterAll(async () => t.close());

const WRITES_IN = (spaceId: string): [Method, string, object | undefined][] => [
  ['POST', sessionsUrl(spaceId), { sessionId: 'new-session' }],
  ['PATCH', sessionUrl(spaceId), { title: 'renamed' }],
  ['DELETE', sessionUrl(spaceId), undefined],
  ['POST', eventsUrl(spaceId), { author: 'user', content: { role: 'user', parts: [{ text: 'more' }] } }],
  ['PATCH', `/v1/spaces/${spaceId}`, { name: 'renamed' }],
  ['DELETE', `/v1/spaces/${spaceId}`, undefined],
];

const READS_IN = (spaceId: string): [Method, string][] => [
  ['GET', `/v1/spaces/${spaceId}`],
  ['GET', `/v1/spaces/${spaceId}/users`],
  ['GET', `/v1/spaces/${spaceId}/sessions`],
  ['GET', sessionsUrl(spaceId)],
  ['GET', sessionUrl(spaceId)],
  ['GET', eventsUrl(spaceId)],
  ['GET', `${eventsUrl(spaceId)}/not-there`],
];

describe('a read-only sub-account on space A', () => {
  let reader: SubAccount;
  beforeAll(async () => {
    reader = await createSubAccount([{ effect: 'allow', actions: ['session:Describe*'], resources: [`space/${spaceA}`] }]);
  });

  it('lists and describes the space, its users, sessions and events (200)', async () => {
    const space = await t.request({ method: 'GET', url: `/v1/spaces/${spaceA}`, token: reader.token });
    expect(space.statusCode).toBe(200);
    expect(space.json().spaceId).toBe(spaceA);
    const sessions = await t.request({ method: 'GET', url: `/v1/spaces/${spaceA}/sessions`, token: reader.token });
    expect(sessions.statusCode).toBe(200);
    expect(sessions.json().sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual([SESSION]);
    expect((await t.request({ method: 'GET', url: sessionUrl(spaceA), token: reader.token })).statusCode).toBe(200);
    expect((await t.request({ method: 'GET', url: `/v1/spaces/${spaceA}/users`, token: reader.token })).statusCode).toBe(200);
    const events = await t.request({ method: 'GET', url: eventsUrl(spaceA), token: reader.token });
    expect(events.statusCode).toBe(200);
    expect(events.json().events).toHaveLength(1);
  });

  it('still gets the 404 of a missing session or event in A', async () => {
    const res = await t.request({ method: 'GET', url: `${eventsUrl(spaceA)}/not-there`, token: reader.token });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('ResourceNotFound.Event');
  });

  it('is refused every write in A (403), naming the action and the space, and nothing changes', async () => {
    for (const [method, url, payload] of WRITES_IN(spaceA)) {
      const res = await expectRefused(reader, method, url, 'UnauthorizedOperation', payload);
      expect(res.json().error.message).toContain(`space/${spaceA}`);
      expect(res.json().error.message).toMatch(/session:[A-Za-z]+/);
    }
    const refused = await expectRefused(reader, 'PATCH', sessionUrl(spaceA), 'UnauthorizedOperation', { title: 'x' });
    expect(refused.json().error.message).toBe(`The policy does not allow session:ModifySession on space/${spaceA}.`);
  });

  it('is refused creating a space (403), and no space appears', async () => {
    await expectRefused(reader, 'POST', '/v1/spaces', 'UnauthorizedOperation', { name: 'mine' });
  });

  it('is refused reads and writes in space B of the same account (403)', async () => {
    for (const [method, url] of READS_IN(spaceB)) await expectRefused(reader, method, url, 'UnauthorizedOperation');
    for (const [method, url, payload] of WRITES_IN(spaceB)) await expectRefused(reader, method, url, 'UnauthorizedOperation', payload);
  });

  it("gets 404 for another account's space and for a missing one, as the root does", async () => {
    const missing = `space-${randomUUID()}`;
    for (const spaceId of [foreignSpace, missing]) {
      for (const [method, url] of READS_IN(spaceId)) await expectRefused(reader, method, url, 'ResourceNotFound.SessionSpace');
      for (const [method, url, payload] of WRITES_IN(spaceId)) await expectRefused(reader, method, url, 'ResourceNotFound.SessionSpace', payload);
    }
    const root = await t.request({ method: 'GET', url: `/v1/spaces/${foreignSpace}` });
    expect(root.statusCode).toBe(404);
  });

  it('answers a malformed space id with the same 400 as for the root, before authorization', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/spaces/not-a-space/sessions', token: reader.token });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
  });

  it('sees only space A in GET /v1/spaces, with a matching totalCount', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/spaces?includeTotal=true', token: reader.token });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ spaces: [expect.objectContaining({ spaceId: spaceA })], totalCount: 1 });
    const root = await t.request({ method: 'GET', url: '/v1/spaces?includeTotal=true' });
    expect(root.json().totalCount).toBe(3);
  });
});

describe('GET /v1/spaces for sub-accounts', () => {
  let spaceC: string;
  beforeAll(async () => {
    spaceC = await insertSpace(t.db, t.account.accountId, 'space C');
  });

  async function walk(token: string, query = '') {
    const seen: string[] = [];
    let pageToken: string | undefined;
    let totalCount: number | undefined;
    do {
      const url = `/v1/spaces?pageSize=1&includeTotal=true${query}${pageToken ? `&pageToken=${encodeURIComponent(pageToken)}` : ''}`;
      const res = await t.request({ method: 'GET', url, token });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.spaces.length).toBeLessThanOrEqual(1);
      seen.push(...body.spaces.map((space: { spaceId: string }) => space.spaceId));
      totalCount = body.totalCount;
      pageToken = body.nextPageToken;
    } while (pageToken);
    return { seen, totalCount };
  }

  it('pages through the spaces allowed one by one (only …)', async () => {
    const sub = await createSubAccount([{ effect: 'allow', actions: ['session:DescribeSessionSpaces'], resources: [`space/${spaceA}`, `space/${spaceC}`] }]);
    expect(await walk(sub.token)).toEqual({ seen: [spaceA, spaceC], totalCount: 2 });
  });

  it('pages through every space but the denied one (all except …)', async () => {
    const sub = await createSubAccount([
      { effect: 'allow', actions: ['session:*'], resources: ['space/*'] },
      { effect: 'deny', actions: ['session:DescribeSessionSpaces'], resources: [`space/${spaceB}`] },
    ]);
    expect(await walk(sub.token)).toEqual({ seen: [t.account.defaultSpaceId, spaceA, spaceC], totalCount: 3 });
    // Filters combine with the policy.
    expect(await walk(sub.token, '&nameLike=space')).toEqual({ seen: [spaceA, spaceC], totalCount: 2 });
  });

  it('shows nothing, with totalCount 0, to a sub-account without a policy or with a deny on space/*', async () => {
    const none = await createSubAccount(undefined);
    const denied = await createSubAccount([
      { effect: 'allow', actions: ['*'], resources: ['*'] },
      { effect: 'deny', actions: ['session:Describe*'], resources: ['space/*'] },
    ]);
    for (const sub of [none, denied]) {
      const res = await t.request({ method: 'GET', url: '/v1/spaces?includeTotal=true', token: sub.token });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ spaces: [], totalCount: 0 });
    }
  });

  it('never shows another account\'s spaces, even with "*" everywhere', async () => {
    const sub = await createSubAccount([{ effect: 'allow', actions: ['*'], resources: ['*'] }]);
    const { seen } = await walk(sub.token);
    expect(seen).not.toContain(foreignSpace);
    expect(seen).toEqual([t.account.defaultSpaceId, spaceA, spaceB, spaceC]);
  });

  it('still rejects a malformed page token for a sub-account that sees nothing', async () => {
    const none = await createSubAccount(undefined);
    const res = await t.request({ method: 'GET', url: '/v1/spaces?pageToken=garbage', token: none.token });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter.PageToken');
  });
});

describe('explicit deny', () => {
  it('beats session:* on *: the denied writes are 403 and change nothing, the rest is allowed', async () => {
    const sub = await createSubAccount([
      { effect: 'allow', actions: ['session:*'], resources: ['*'] },
      { effect: 'deny', actions: ['session:DeleteSession', 'session:AppendEvent'], resources: [`space/${spaceA}`] },
    ]);
    await expectRefused(sub, 'DELETE', sessionUrl(spaceA), 'UnauthorizedOperation');
    await expectRefused(sub, 'POST', eventsUrl(spaceA), 'UnauthorizedOperation', { author: 'user', content: { role: 'user', parts: [{ text: 'no' }] } });

    expect((await t.request({ method: 'GET', url: sessionUrl(spaceA), token: sub.token })).statusCode).toBe(200);
    const created = await t.request({ method: 'POST', url: sessionsUrl(spaceB), token: sub.token, payload: { sessionId: 'by-sub' } });
    expect(created.statusCode).toBe(201);
    const space = await t.request({ method: 'POST', url: '/v1/spaces', token: sub.token, payload: { name: 'made by a sub-account' } });
    expect(space.statusCode).toBe(201);
  });

  it('on session:Describe* hides a space the sub-account could otherwise change', async () => {
    const sub = await createSubAccount([
      { effect: 'allow', actions: ['*'], resources: [`space/${spaceA}`] },
      { effect: 'deny', actions: ['session:Describe*'], resources: [`space/${spaceA}`] },
    ]);
    await expectRefused(sub, 'GET', `/v1/spaces/${spaceA}/sessions`, 'UnauthorizedOperation');
    const list = await t.request({ method: 'GET', url: '/v1/spaces', token: sub.token });
    expect(list.json().spaces).toEqual([]);
  });
});

describe('the authorization hooks on a bare scope', () => {
  function bareApp(register: (scope: FastifyInstance) => void) {
    const app = Fastify({ logger: false });
    registerErrorHandling(app);
    // Not awaited: a failing plugin must surface from app.ready(), as it does for buildApp.
    void app.register(async (scope) => {
      registerAuthentication(scope, (authorization) => authenticate(t.db, authorization));
      registerAuthorization(scope, (accountId, spaceId) => findSpaceOrThrow(t.db, accountId, spaceId));
      register(scope);
    });
    return app;
  }

  it('refuse to start an app with a route that declares no action', async () => {
    const app = bareApp((scope) => scope.get('/forgotten', async () => ({ ok: true })));
    await expect(app.ready()).rejects.toThrow(/GET \/forgotten: declares no config\.action/);
    await app.close().catch(() => undefined);
  });

  it('refuse to start with a space action on a route without :spaceId', async () => {
    const app = bareApp((scope) => scope.get('/sessions-everywhere', { config: { action: 'session:DescribeSessions' } }, async () => ({ ok: true })));
    await expect(app.ready()).rejects.toThrow(/without a :spaceId path parameter/);
    await app.close().catch(() => undefined);
  });

  it('evaluate IAM actions on the account, which only statements on "*" reach', async () => {
    const app = bareApp((scope) => scope.get('/iam-probe', { config: { action: 'iam:DescribeSubAccounts' } }, async () => ({ ok: true })));
    await app.ready();
    const probe = async (token: string) => app.inject({ method: 'GET', url: '/iam-probe', headers: { authorization: `Bearer ${token}` } });
    const onSpaces = await createSubAccount([{ effect: 'allow', actions: ['*'], resources: ['space/*'] }]);
    const onEverything = await createSubAccount([{ effect: 'allow', actions: ['iam:Describe*'], resources: ['*'] }]);

    expect((await probe(t.account.rootCredential.token)).statusCode).toBe(200);
    expect((await probe(onEverything.token)).statusCode).toBe(200);
    const refused = await probe(onSpaces.token);
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toMatchObject({ code: 'UnauthorizedOperation', message: 'The policy does not allow iam:DescribeSubAccounts on account.' });
    await app.close();
  });
});
