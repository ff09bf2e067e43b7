// The permission matrix (issue 3): every /v1 route × every kind of caller → the expected status.
// A refused write (any non-2xx answer to POST/PATCH/PUT/DELETE) must leave the database untouched.
//
// Callers:
//   root       the account's root credential (may do everything)
//   readA      sub-account allowed session:Describe* on space A only
//   fullB      sub-account allowed session:* on space B only
//   denyA      sub-account allowed session:* on space/*, with an explicit deny of session:* on A
//   disabled   a disabled credential of the root (would be allowed everything if it were enabled)
//   anonymous  no Authorization header
//   otherRoot  the root of another account (A and B are not its own: 404, never 403)
import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PolicyStatementValue } from '../../src/lib/policy.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import {
  databaseSnapshot,
  disableCredential,
  everythingExcept,
  fullAccessOn,
  insertCredential,
  insertSubAccount,
  readOnlyOn,
  type TestSubAccount,
} from '../support/principals.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const CALLERS = ['root', 'readA', 'fullB', 'denyA', 'disabled', 'anonymous', 'otherRoot'] as const;
type Caller = (typeof CALLERS)[number];

interface SpaceFixture {
  spaceId: string;
  userId: string;
  sessionId: string;
  eventId: string;
}

interface World {
  t: TestApp;
  A: SpaceFixture;
  B: SpaceFixture;
  tokens: Record<Caller, string | null>;
  subs: { readA: TestSubAccount; fullB: TestSubAccount; denyA: TestSubAccount };
}

interface Request {
  method: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  url: string;
  payload?: InjectOptions['payload'];
}

interface Row {
  /** The route as the OpenAPI document names it, e.g. `GET /v1/spaces/{spaceId}`. */
  route: string;
  /** What the row aims at, e.g. "space A" or "a fresh empty space". */
  target: string;
  /** Builds the request; may first create a throwaway resource for the case (before the snapshot). */
  build: (world: World) => Request | Promise<Request>;
  expected: Record<Caller, number>;
}

let counter = 0;
const fresh = (prefix: string) => `${prefix}-${process.pid}-${++counter}`;

const spaceUrl = (s: SpaceFixture) => `/v1/spaces/${s.spaceId}`;
const userSessionsUrl = (s: SpaceFixture) => `${spaceUrl(s)}/users/${s.userId}/sessions`;
const sessionUrl = (s: SpaceFixture) => `${userSessionsUrl(s)}/${s.sessionId}`;

/** A session made for one case (deleted by it), so deletes never break the fixtures. */
async function throwawaySession(w: World, s: SpaceFixture): Promise<string> {
  const sessionId = fresh('doomed');
  await insertSession(w.t.db, { accountId: w.t.account.accountId, spaceId: s.spaceId, userId: s.userId, sessionId });
  return `${userSessionsUrl(s)}/${sessionId}`;
}

const on = (key: 'A' | 'B') => (w: World) => w[key];

/** Expected statuses, in the order of CALLERS: root readA fullB denyA disabled anonymous otherRoot. */
type Statuses = readonly [number, number, number, number, number, number, number];

const row = (route: string, target: string, build: Row['build'], ...s: Statuses): Row => ({
  route,
  target,
  build,
  expected: { root: s[0], readA: s[1], fullB: s[2], denyA: s[3], disabled: s[4], anonymous: s[5], otherRoot: s[6] },
});

/* prettier-ignore */
const SPACE_ROWS: Row[] = [
  //                                                                                                      root readA fullB denyA disab anon other
  row('POST /v1/spaces', 'a new space', () => ({ method: 'POST', url: '/v1/spaces', payload: { name: fresh('new') } }), 201, 403, 403, 201, 401, 401, 201),
  row('GET /v1/spaces', 'the account', () => ({ method: 'GET', url: '/v1/spaces' }),                                       200, 200, 200, 200, 401, 401, 200),
  row('GET /v1/spaces/{spaceId}', 'space A', (w) => ({ method: 'GET', url: spaceUrl(w.A) }),                              200, 200, 403, 403, 401, 401, 404),
  row('GET /v1/spaces/{spaceId}', 'space B', (w) => ({ method: 'GET', url: spaceUrl(w.B) }),                              200, 403, 200, 200, 401, 401, 404),
  row('GET /v1/spaces/{spaceId}', 'a space no account has', () => ({ method: 'GET', url: `/v1/spaces/space-00000000-0000-4000-8000-000000000000` }),
                                                                                                                          404, 404, 404, 404, 401, 401, 404),
  row('PATCH /v1/spaces/{spaceId}', 'space A', (w) => ({ method: 'PATCH', url: spaceUrl(w.A), payload: { description: fresh('d') } }),
                                                                                                                          200, 403, 403, 403, 401, 401, 404),
  row('PATCH /v1/spaces/{spaceId}', 'space B', (w) => ({ method: 'PATCH', url: spaceUrl(w.B), payload: { description: fresh('d') } }),
                                                                                                                          200, 403, 200, 200, 401, 401, 404),
  // A and B hold sessions: whoever gets past authorization meets the 409 (and nothing is deleted).
  row('DELETE /v1/spaces/{spaceId}', 'space A (not empty)', (w) => ({ method: 'DELETE', url: spaceUrl(w.A) }),           409, 403, 403, 403, 401, 401, 404),
  row('DELETE /v1/spaces/{spaceId}', 'space B (not empty)', (w) => ({ method: 'DELETE', url: spaceUrl(w.B) }),           409, 403, 409, 409, 401, 401, 404),
  row('DELETE /v1/spaces/{spaceId}', 'a fresh empty space', async (w) => ({ method: 'DELETE', url: `/v1/spaces/${await insertSpace(w.t.db, w.t.account.accountId, fresh('empty'))}` }),
                                                                                                                          204, 403, 403, 204, 401, 401, 404),
];

/* prettier-ignore */
const SESSION_ROWS: Row[] = (['A', 'B'] as const).flatMap((key) => {
  const s = on(key);
  // Allowed on A: root, readA (reads only). Allowed on B: root, fullB, denyA.
  const read: Statuses = key === 'A' ? [200, 200, 403, 403, 401, 401, 404] : [200, 403, 200, 200, 401, 401, 404];
  const write = (ok: number): Statuses => (key === 'A' ? [ok, 403, 403, 403, 401, 401, 404] : [ok, 403, ok, ok, 401, 401, 404]);
  const target = `space ${key}`;
  return [
    row('GET /v1/spaces/{spaceId}/users', target, (w) => ({ method: 'GET', url: `${spaceUrl(s(w))}/users` }), ...read),
    row('POST /v1/spaces/{spaceId}/users/{userId}/sessions', target, (w) => ({ method: 'POST', url: userSessionsUrl(s(w)), payload: { sessionId: fresh('s'), title: 't' } }), ...write(201)),
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions', target, (w) => ({ method: 'GET', url: userSessionsUrl(s(w)) }), ...read),
    row('GET /v1/spaces/{spaceId}/sessions', target, (w) => ({ method: 'GET', url: `${spaceUrl(s(w))}/sessions` }), ...read),
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}', target, (w) => ({ method: 'GET', url: sessionUrl(s(w)) }), ...read),
    row('PATCH /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}', target, (w) => ({ method: 'PATCH', url: sessionUrl(s(w)), payload: { title: fresh('t') } }), ...write(200)),
    row('DELETE /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}', `${target}, a throwaway session`, async (w) => ({ method: 'DELETE', url: await throwawaySession(w, s(w)) }), ...write(204)),
    row('POST /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events', target, (w) => ({ method: 'POST', url: `${sessionUrl(s(w))}/events`, payload: { eventId: fresh('e'), author: 'user' } }), ...write(201)),
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events', target, (w) => ({ method: 'GET', url: `${sessionUrl(s(w))}/events` }), ...read),
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/{eventId}', target, (w) => ({ method: 'GET', url: `${sessionUrl(s(w))}/events/${s(w).eventId}` }), ...read),
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/state-at/{seq}', target, (w) => ({ method: 'GET', url: `${sessionUrl(s(w))}/state-at/1` }), ...read),
    row('GET /v1/spaces/{spaceId}/permissions', target, (w) => ({ method: 'GET', url: `${spaceUrl(s(w))}/permissions` }), ...read),
    row('GET /v1/spaces/{spaceId}/users/{userId}/state', target, (w) => ({ method: 'GET', url: `${spaceUrl(s(w))}/users/${s(w).userId}/state` }), ...read),
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/context', target, (w) => ({ method: 'GET', url: `${sessionUrl(s(w))}/context` }), ...read),
    row('PUT /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/context', target, (w) => ({ method: 'PUT', url: `${sessionUrl(s(w))}/context`, payload: { memo: { note: fresh('memo') } } }), ...write(200)),
    // Export is its own action: the read-only policy (session:Describe*) does not include it.
    row('GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/export', target, (w) => ({ method: 'GET', url: `${sessionUrl(s(w))}/export` }), ...write(200)),
    row('POST /v1/spaces/{spaceId}/sessions/import', target, async (w) => ({ method: 'POST', url: `${spaceUrl(s(w))}/sessions/import`, payload: await exportedUnderNewId(w, s(w)) }), ...write(201)),
  ];
});

/** An export document of the fixture session, renamed so that importing it creates a new session. */
async function exportedUnderNewId(w: World, s: SpaceFixture): Promise<Record<string, unknown>> {
  const res = await w.t.request({ method: 'GET', url: `${sessionUrl(s)}/export` });
  expect(res.statusCode).toBe(200);
  const document = res.json() as { session: Record<string, unknown> };
  return { ...document, session: { ...document.session, sessionId: fresh('imported') } };
}

// IAM operations act on the resource `account`: only the root (or a sub allowed iam:* on *) may
// call them. Another account's root reaches only its own account: this one's sub-accounts and
// credentials are 404 to it.
const subUrl = (id: string) => `/v1/iam/subaccounts/${id}`;
const throwawaySub = (w: World) => insertSubAccount(w.t.db, w.t.account.accountId, { statements: readOnlyOn(w.A.spaceId) });

/* prettier-ignore */
const IAM_ROWS: Row[] = [
  //                                                                                                      root readA fullB denyA disab anon other
  row('POST /v1/iam/subaccounts', 'a new sub-account', () => ({ method: 'POST', url: '/v1/iam/subaccounts', payload: { name: fresh('sub') } }),
                                                                                                                          201, 403, 403, 403, 401, 401, 201),
  row('GET /v1/iam/subaccounts', 'the account', () => ({ method: 'GET', url: '/v1/iam/subaccounts' }),                   200, 403, 403, 403, 401, 401, 200),
  row('GET /v1/iam/subaccounts/{subAccountId}', 'sub-account readA', (w) => ({ method: 'GET', url: subUrl(w.subs.readA.principalId) }),
                                                                                                                          200, 403, 403, 403, 401, 401, 404),
  row('DELETE /v1/iam/subaccounts/{subAccountId}', 'a throwaway sub-account', async (w) => ({ method: 'DELETE', url: subUrl((await throwawaySub(w)).principalId) }),
                                                                                                                          204, 403, 403, 403, 401, 401, 404),
  row('GET /v1/iam/subaccounts/{subAccountId}/policy', 'sub-account readA', (w) => ({ method: 'GET', url: `${subUrl(w.subs.readA.principalId)}/policy` }),
                                                                                                                          200, 403, 403, 403, 401, 401, 404),
  row('PUT /v1/iam/subaccounts/{subAccountId}/policy', 'a throwaway sub-account', async (w) => ({
    method: 'PUT',
    url: `${subUrl((await throwawaySub(w)).principalId)}/policy`,
    payload: { statements: fullAccessOn(w.B.spaceId) },
  }),                                                                                                                     200, 403, 403, 403, 401, 401, 404),
  row('GET /v1/iam/subaccounts/{subAccountId}/credentials', 'sub-account readA', (w) => ({ method: 'GET', url: `${subUrl(w.subs.readA.principalId)}/credentials` }),
                                                                                                                          200, 403, 403, 403, 401, 401, 404),
  row('POST /v1/iam/subaccounts/{subAccountId}/credentials', 'a throwaway sub-account', async (w) => ({ method: 'POST', url: `${subUrl((await throwawaySub(w)).principalId)}/credentials` }),
                                                                                                                          201, 403, 403, 403, 401, 401, 404),
  row('GET /v1/iam/credentials', "the caller's root", () => ({ method: 'GET', url: '/v1/iam/credentials' }),             200, 403, 403, 403, 401, 401, 200),
  row('POST /v1/iam/credentials', "the caller's root", () => ({ method: 'POST', url: '/v1/iam/credentials' }),           201, 403, 403, 403, 401, 401, 201),
  row('PATCH /v1/iam/credentials/{secretId}', "a throwaway sub-account's credential", async (w) => ({
    method: 'PATCH',
    url: `/v1/iam/credentials/${(await throwawaySub(w)).credential.secretId}`,
    payload: { status: 'disabled' },
  }),                                                                                                                     200, 403, 403, 403, 401, 401, 404),
  row('DELETE /v1/iam/credentials/{secretId}', "a throwaway sub-account's credential", async (w) => ({
    method: 'DELETE',
    url: `/v1/iam/credentials/${(await throwawaySub(w)).credential.secretId}`,
  }),                                                                                                                     204, 403, 403, 403, 401, 401, 404),
];

const MATRIX: Row[] = [...SPACE_ROWS, ...SESSION_ROWS, ...IAM_ROWS];

const CASES = MATRIX.flatMap((entry) =>
  CALLERS.map((caller) => ({ ...entry, caller, status: entry.expected[caller], name: `${entry.route} on ${entry.target}` })),
);

let world: World;

/** Space, session and event made by the root through the API, as a user would. */
async function apiFixture(t: TestApp, name: string): Promise<SpaceFixture> {
  const space = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name } });
  expect(space.statusCode, space.body).toBe(201);
  const fixture: SpaceFixture = { spaceId: space.json().spaceId, userId: 'alice', sessionId: `${name}-session`, eventId: `${name}-event` };
  const session = await t.request({ method: 'POST', url: userSessionsUrl(fixture), payload: { sessionId: fixture.sessionId } });
  expect(session.statusCode, session.body).toBe(201);
  const event = await t.request({ method: 'POST', url: `${sessionUrl(fixture)}/events`, payload: { eventId: fixture.eventId, author: 'user' } });
  expect(event.statusCode, event.body).toBe(201);
  return fixture;
}

beforeAll(async () => {
  const t = await createTestApp();
  const A = await apiFixture(t, 'space-a');
  const B = await apiFixture(t, 'space-b');
  const accountId = t.account.accountId;
  const subs = {
    readA: await insertSubAccount(t.db, accountId, { name: 'read-only on A', statements: readOnlyOn(A.spaceId) }),
    fullB: await insertSubAccount(t.db, accountId, { name: 'full on B', statements: fullAccessOn(B.spaceId) }),
    denyA: await insertSubAccount(t.db, accountId, { name: 'all but A', statements: everythingExcept(A.spaceId) }),
  };
  const disabled = await insertCredential(t.db, accountId, 'root');
  await disableCredential(t.db, disabled.secretId);
  const other = await t.createAccount();
  world = {
    t,
    A,
    B,
    subs,
    tokens: {
      root: t.account.rootCredential.token,
      readA: subs.readA.credential.token,
      fullB: subs.fullB.credential.token,
      denyA: subs.denyA.credential.token,
      disabled: disabled.token,
      anonymous: null,
      otherRoot: other.rootCredential.token,
    },
  };
});
afterAll(async () => world?.t.close());

const isWrite = (method: Request['method']) => method !== 'GET';

const notFoundCode = (url: string) =>
  url.startsWith('/v1/spaces/') ? 'ResourceNotFound.SessionSpace' : url.startsWith('/v1/iam/subaccounts/') ? 'ResourceNotFound.SubAccount' : 'ResourceNotFound.Credential';

describe('permission matrix', () => {
  it.each(CASES)('$name as $caller → $status', async ({ build, caller, status }) => {
    const { t, tokens } = world;
    const request = await build(world);
    const before = await databaseSnapshot(t.db);
    const res = await t.request({ ...request, token: tokens[caller] });
    expect(res.statusCode, res.body).toBe(status);
    if (status === 401) expect(res.json().error.code).toBe('AuthFailure');
    if (status === 403) expect(res.json().error.code).toBe('UnauthorizedOperation');
    if (status === 404) expect(res.json().error.code).toBe(notFoundCode(request.url));
    if (!isWrite(request.method)) return;
    // A refused write changes nothing; a successful one must show in the snapshot (which proves
    // the snapshot would notice a change).
    const after = await databaseSnapshot(t.db);
    if (status >= 300) expect(after).toEqual(before);
    else expect(after).not.toEqual(before);
  });

  it('covers every /v1 route the application serves', async () => {
    const paths = (world.t.app.swagger() as { paths: Record<string, Record<string, unknown>> }).paths;
    const served = Object.entries(paths)
      .filter(([path]) => path.startsWith('/v1/'))
      .flatMap(([path, operations]) => Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`));
    // A stream does not end, so app.inject cannot read its answer: its matrix is in
    // test/integration/event-stream.test.ts ("is authorized like the events list"), over a socket.
    const covered = new Set([...MATRIX.map((entry) => entry.route), 'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/stream']);
    expect(served.filter((route) => !covered.has(route))).toEqual([]);
  });
});

describe('lists filter by permission', () => {
  const spaceIds = async (caller: Caller, query = '') => {
    const res = await world.t.request({ method: 'GET', url: `/v1/spaces${query}`, token: world.tokens[caller] });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as { spaces: { spaceId: string }[]; totalCount?: number; nextPageToken?: string };
  };

  it('shows a sub-account allowed on one space only that space, with a matching total', async () => {
    const readA = await spaceIds('readA', '?includeTotal=true');
    expect(readA.spaces.map((s) => s.spaceId)).toEqual([world.A.spaceId]);
    expect(readA.totalCount).toBe(1);
    const fullB = await spaceIds('fullB', '?includeTotal=true');
    expect(fullB.spaces.map((s) => s.spaceId)).toEqual([world.B.spaceId]);
    expect(fullB.totalCount).toBe(1);
  });

  it('hides an explicitly denied space from a sub-account allowed on space/*', async () => {
    const all = await spaceIds('root', '?pageSize=100&includeTotal=true');
    const denyA = await spaceIds('denyA', '?pageSize=100&includeTotal=true');
    const ids = denyA.spaces.map((s) => s.spaceId);
    expect(ids).not.toContain(world.A.spaceId);
    expect(ids).toContain(world.B.spaceId);
    expect(ids).toEqual(all.spaces.map((s) => s.spaceId).filter((id) => id !== world.A.spaceId));
    expect(denyA.totalCount).toBe(all.totalCount! - 1);
  });

  it('pages a filtered list without leaking hidden spaces into later pages', async () => {
    const seen: string[] = [];
    let token: string | undefined;
    do {
      const page = await spaceIds('denyA', `?pageSize=1${token ? `&pageToken=${encodeURIComponent(token)}` : ''}`);
      seen.push(...page.spaces.map((s) => s.spaceId));
      token = page.nextPageToken;
    } while (token);
    expect(seen).not.toContain(world.A.spaceId);
    expect(seen).toContain(world.B.spaceId);
  });

  it("shows another account's root none of this account's spaces", async () => {
    const other = await spaceIds('otherRoot', '?pageSize=100');
    expect(other.spaces.map((s) => s.spaceId)).not.toContain(world.A.spaceId);
    expect(other.spaces.map((s) => s.spaceId)).not.toContain(world.B.spaceId);
  });
});

describe('principals outside the matrix', () => {
  it('lets a sub-account without a policy do nothing, and list no spaces', async () => {
    const { t } = world;
    const bare = await insertSubAccount(t.db, t.account.accountId);
    const list = await t.request({ method: 'GET', url: '/v1/spaces?includeTotal=true', token: bare.credential.token });
    expect(list.statusCode, list.body).toBe(200);
    expect(list.json()).toMatchObject({ spaces: [], totalCount: 0 });
    const single = await t.request({ method: 'GET', url: spaceUrl(world.A), token: bare.credential.token });
    expect(single.statusCode).toBe(403);
    expect(single.json().error.code).toBe('UnauthorizedOperation');
  });

  it('lets a sub-account allowed iam:* on * use the IAM API, but not one allowed iam:* on space/*', async () => {
    const { t } = world;
    const admin = await insertSubAccount(t.db, t.account.accountId, { statements: [{ effect: 'allow', actions: ['iam:*'], resources: ['*'] }] });
    const scoped = await insertSubAccount(t.db, t.account.accountId, { statements: [{ effect: 'allow', actions: ['iam:*'], resources: ['space/*'] }] });
    expect((await t.request({ method: 'GET', url: '/v1/iam/subaccounts', token: admin.credential.token })).statusCode).toBe(200);
    const refused = await t.request({ method: 'GET', url: '/v1/iam/subaccounts', token: scoped.credential.token });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error.code).toBe('UnauthorizedOperation');
    // iam:* grants no session action.
    expect((await t.request({ method: 'GET', url: spaceUrl(world.A), token: admin.credential.token })).statusCode).toBe(403);
  });
});

// What a write answers about the session (issue 10): a principal allowed to write but not to
// describe sessions gets the ids, counts, revision and times, never title, metadata, state or memo.
describe('write answers show session contents only to callers allowed session:DescribeSessions', () => {
  const SUMMARY_FIELDS = ['createTime', 'eventCount', 'expireTime', 'revision', 'sessionId', 'spaceId', 'updateTime', 'userId', 'windowStartSeq'];
  const FULL_FIELDS = [...SUMMARY_FIELDS, 'memo', 'metadata', 'state', 'title'].sort();
  const only = (actions: string[], spaceId: string): PolicyStatementValue[] => [{ effect: 'allow', actions, resources: [`space/${spaceId}`] }];
  const writeButNotRead = (actions: string[], spaceId: string): PolicyStatementValue[] => [
    { effect: 'allow', actions, resources: [`space/${spaceId}`] },
    { effect: 'deny', actions: ['session:Describe*'], resources: [`space/${spaceId}`] },
  ];

  /** A session holding something worth hiding: title, metadata, state with user: and app: keys, memo. */
  async function secretSession(): Promise<{ url: string; sessionId: string; eventId: string }> {
    const s = world.A;
    const sessionId = fresh('secret');
    const url = `${userSessionsUrl(s)}/${sessionId}`;
    const created = await world.t.request({
      method: 'POST',
      url: userSessionsUrl(s),
      payload: { sessionId, title: 'secret title', metadata: { customer: 'acme' }, state: { plan: 'secret', 'user:tier': 'gold' } },
    });
    expect(created.statusCode, created.body).toBe(201);
    const eventId = fresh('e');
    const event = await world.t.request({
      method: 'POST',
      url: `${url}/events`,
      payload: { eventId, author: 'user', content: { parts: [{ text: 'hello' }] }, actions: { stateDelta: { 'app:flag': 'on' } } },
    });
    expect(event.statusCode, event.body).toBe(201);
    const memo = await world.t.request({ method: 'PUT', url: `${url}/context`, payload: { memo: { note: 'secret memo' } } });
    expect(memo.statusCode, memo.body).toBe(200);
    return { url, sessionId, eventId };
  }

  const sub = async (statements: PolicyStatementValue[]) => (await insertSubAccount(world.t.db, world.t.account.accountId, { statements })).credential.token;
  const fields = (session: Record<string, unknown>) => Object.keys(session).sort();

  it('answers an AppendEvent-only caller its single appended event and a session without contents', async () => {
    const { url } = await secretSession();
    const token = await sub(writeButNotRead(['session:AppendEvent'], world.A.spaceId));
    const res = await world.t.request({ method: 'POST', url: `${url}/events`, token, payload: { eventId: fresh('e'), author: 'agent', content: { parts: [{ text: 'mine' }] } } });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body.events).toHaveLength(1);
    expect(body.events[0]).toMatchObject({ author: 'agent', seq: 2, content: { parts: [{ text: 'mine' }] } });
    expect(fields(body.session)).toEqual(SUMMARY_FIELDS);
    expect(body.session).toMatchObject({ eventCount: 2, revision: 4 });
    expect(res.headers.etag).toBe(`"${body.session.revision}"`);
  });

  it('answers an AppendEvent-only caller its batch and a session without contents', async () => {
    const { url } = await secretSession();
    const token = await sub(writeButNotRead(['session:AppendEvent'], world.A.spaceId));
    const events = [
      { eventId: fresh('e'), author: 'user' },
      { eventId: fresh('e'), author: 'agent', actions: { stateDelta: { step: 2 } } },
    ];
    const res = await world.t.request({ method: 'POST', url: `${url}/events`, token, payload: { events } });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json();
    expect(body.events.map((e: { eventId: string; seq: number }) => [e.eventId, e.seq])).toEqual([[events[0]!.eventId, 2], [events[1]!.eventId, 3]]);
    expect(fields(body.session)).toEqual(SUMMARY_FIELDS);
    expect(body.session.eventCount).toBe(3);
  });

  it('answers an AppendEvent-only replay of a stored event with that event and a session without contents', async () => {
    const { url, eventId } = await secretSession();
    const token = await sub(writeButNotRead(['session:AppendEvent'], world.A.spaceId));
    const before = await databaseSnapshot(world.t.db);
    const res = await world.t.request({
      method: 'POST',
      url: `${url}/events`,
      token,
      payload: { eventId, author: 'user', content: { parts: [{ text: 'hello' }] }, actions: { stateDelta: { 'app:flag': 'on' } } },
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body.events).toHaveLength(1);
    expect(body.events[0]).toMatchObject({ eventId, seq: 1, author: 'user' });
    expect(fields(body.session)).toEqual(SUMMARY_FIELDS);
    expect(body.session).toMatchObject({ eventCount: 1, revision: 3 });
    expect(await databaseSnapshot(world.t.db)).toEqual(before);
  });

  it('answers a CreateSession-only caller an existing session (idempotent create) without its contents', async () => {
    const { sessionId } = await secretSession();
    const token = await sub(writeButNotRead(['session:CreateSession'], world.A.spaceId));
    const existing = await world.t.request({ method: 'POST', url: userSessionsUrl(world.A), token, payload: { sessionId, title: 'guess' } });
    expect(existing.statusCode, existing.body).toBe(200);
    expect(fields(existing.json())).toEqual(SUMMARY_FIELDS);
    expect(existing.json()).toMatchObject({ sessionId, revision: 3 });
    // A new session too: its merged state would show the user's shared `user:*` keys.
    const created = await world.t.request({ method: 'POST', url: userSessionsUrl(world.A), token, payload: { sessionId: fresh('new'), state: { mine: 1 } } });
    expect(created.statusCode, created.body).toBe(201);
    expect(fields(created.json())).toEqual(SUMMARY_FIELDS);
  });

  it('answers a ModifySession-only caller (PATCH, PUT context) and an ImportSession-only caller without contents', async () => {
    const { url } = await secretSession();
    const modifier = await sub(writeButNotRead(['session:ModifySession'], world.A.spaceId));
    const patched = await world.t.request({ method: 'PATCH', url, token: modifier, payload: { metadata: { stage: 'x' } } });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(fields(patched.json())).toEqual(SUMMARY_FIELDS);
    const context = await world.t.request({ method: 'PUT', url: `${url}/context`, token: modifier, payload: { windowStartSeq: 1 } });
    expect(context.statusCode, context.body).toBe(200);
    expect(fields(context.json())).toEqual(SUMMARY_FIELDS);
    const importer = await sub(writeButNotRead(['session:ImportSession'], world.A.spaceId));
    const imported = await world.t.request({ method: 'POST', url: `${spaceUrl(world.A)}/sessions/import`, token: importer, payload: await exportedUnderNewId(world, world.A) });
    expect(imported.statusCode, imported.body).toBe(201);
    expect(fields(imported.json())).toEqual(SUMMARY_FIELDS);
  });

  it('answers the root and callers also allowed session:DescribeSessions the whole session', async () => {
    const { url, sessionId } = await secretSession();
    const reader = await sub(only(['session:AppendEvent', 'session:CreateSession', 'session:DescribeSessions'], world.A.spaceId));
    for (const token of [world.tokens.root!, reader]) {
      const appended = await world.t.request({ method: 'POST', url: `${url}/events`, token, payload: { author: 'agent' } });
      expect(appended.statusCode, appended.body).toBe(201);
      expect(fields(appended.json().session)).toEqual(FULL_FIELDS);
      expect(appended.json().session).toMatchObject({
        title: 'secret title',
        metadata: { customer: 'acme' },
        state: { plan: 'secret', 'user:tier': 'gold', 'app:flag': 'on' },
        memo: { note: 'secret memo' },
      });
      const existing = await world.t.request({ method: 'POST', url: userSessionsUrl(world.A), token, payload: { sessionId } });
      expect(existing.statusCode, existing.body).toBe(200);
      expect(existing.json()).toMatchObject({ title: 'secret title', state: { plan: 'secret' }, memo: { note: 'secret memo' } });
    }
    // The wildcard read policy of the matrix counts too, on the space it names only.
    const fullB = await world.t.request({ method: 'POST', url: `${sessionUrl(world.B)}/events`, token: world.tokens.fullB, payload: { author: 'agent' } });
    expect(fields(fullB.json().session)).toEqual(FULL_FIELDS);
  });
});
