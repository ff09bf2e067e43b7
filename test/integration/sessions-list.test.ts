import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let spaceId: string;
beforeAll(async () => {
  t = await createTestApp();
  spaceId = await insertSpace(t.db, t.account.accountId);
  for (const fixture of FIXTURES) await insertFixture(spaceId, fixture);
});
afterAll(async () => t.close());

interface Fixture {
  userId: string;
  sessionId: string;
  title: string;
  metadata: Record<string, string>;
  created: number; // minutes after BASE
  updated: number;
}

const BASE = Date.parse('2026-01-01T00:00:00.000Z');
const at = (minutes: number) => new Date(BASE + minutes * 60_000);

// Create and update orders differ on purpose, so a test can tell which one a list used.
const FIXTURES: Fixture[] = [
  { userId: 'alice', sessionId: 'a1', title: 'Plan a trip', metadata: { env: 'prod', team: 'x' }, created: 1, updated: 50 },
  { userId: 'alice', sessionId: 'a2', title: '100% sure_thing', metadata: { env: 'dev', team: 'x' }, created: 2, updated: 40 },
  { userId: 'alice', sessionId: 'a3', title: '100 percent sure', metadata: { env: 'prod', team: 'y', 'q.example/expr': 'a=b' }, created: 3, updated: 30 },
  { userId: 'alice', sessionId: 'a4', title: 'back\\slash', metadata: { env: 'test' }, created: 4, updated: 20 },
  { userId: 'alice', sessionId: 'a5', title: 'Plan a trip', metadata: {}, created: 5, updated: 10 },
  { userId: 'bob', sessionId: 'b1', title: 'Plan a trip', metadata: { env: 'prod' }, created: 6, updated: 45 },
  { userId: 'bob', sessionId: 'a1', title: 'bob has an a1 too', metadata: { env: 'dev' }, created: 7, updated: 35 },
  { userId: 'carol', sessionId: 'c1', title: 'plan a trip', metadata: { env: 'prod', team: 'y' }, created: 8, updated: 25 },
];

async function insertFixture(space: string, fixture: Fixture) {
  const key = { accountId: t.account.accountId, spaceId: space, userId: fixture.userId, sessionId: fixture.sessionId };
  await insertSession(t.db, key, { title: fixture.title, metadata: fixture.metadata });
  await t.db
    .updateTable('sessions')
    .set({ create_time: at(fixture.created), update_time: at(fixture.updated) })
    .where('space_id', '=', space)
    .where('user_id', '=', fixture.userId)
    .where('session_id', '=', fixture.sessionId)
    .execute();
}

const userUrl = (userId: string, query = '') => `/v1/spaces/${spaceId}/users/${userId}/sessions${query}`;
const spaceUrl = (query = '') => `/v1/spaces/${spaceId}/sessions${query}`;

/** `user/session` of each listed session, in order. */
async function listed(url: string): Promise<string[]> {
  const res = await t.request({ method: 'GET', url });
  expect(res.statusCode, res.body).toBe(200);
  return res.json().sessions.map((session: { userId: string; sessionId: string }) => `${session.userId}/${session.sessionId}`);
}

async function expectError(url: string, code: string, field?: string) {
  const res = await t.request({ method: 'GET', url });
  expect(res.statusCode).toBe(code === 'ResourceNotFound.SessionSpace' ? 404 : 400);
  expect(res.json().error.code).toBe(code);
  if (field) expect(res.json().error.details.issues).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
}

describe("one user's sessions", () => {
  it('lists only that user, newest update first, as full sessions', async () => {
    expect(await listed(userUrl('alice'))).toEqual(['alice/a1', 'alice/a2', 'alice/a3', 'alice/a4', 'alice/a5']);
    const res = await t.request({ method: 'GET', url: userUrl('bob') });
    expect(res.json()).toEqual({ sessions: [expect.objectContaining({ sessionId: 'b1', spaceId, revision: 1, state: {} }), expect.objectContaining({ sessionId: 'a1' })] });
  });

  it('orders by createTime or updateTime, desc or asc', async () => {
    expect(await listed(userUrl('alice', '?orderBy=createTime'))).toEqual(['alice/a5', 'alice/a4', 'alice/a3', 'alice/a2', 'alice/a1']);
    expect(await listed(userUrl('alice', '?orderBy=createTime&order=asc'))).toEqual(['alice/a1', 'alice/a2', 'alice/a3', 'alice/a4', 'alice/a5']);
    expect(await listed(userUrl('alice', '?order=asc'))).toEqual(['alice/a5', 'alice/a4', 'alice/a3', 'alice/a2', 'alice/a1']);
  });

  it('filters by exact title', async () => {
    expect(await listed(userUrl('alice', '?title=Plan%20a%20trip'))).toEqual(['alice/a1', 'alice/a5']);
    expect(await listed(userUrl('alice', '?title=Plan'))).toEqual([]);
  });

  it('filters by titleLike: contains, case-sensitive, with % _ and \\ taken literally', async () => {
    expect(await listed(userUrl('alice', '?titleLike=lan%20a'))).toEqual(['alice/a1', 'alice/a5']);
    expect(await listed(spaceUrl('?titleLike=plan'))).toEqual(['carol/c1']);
    expect(await listed(userUrl('alice', '?titleLike=100%25'))).toEqual(['alice/a2']);
    expect(await listed(userUrl('alice', '?titleLike=e_t'))).toEqual(['alice/a2']);
    expect(await listed(userUrl('alice', '?titleLike=k%5Cs'))).toEqual(['alice/a4']);
  });

  it('rejects title together with titleLike', () => expectError(userUrl('alice', '?title=a&titleLike=b'), 'InvalidParameter', 'titleLike'));

  it('filters by metadata: one key any value, several keys all of them', async () => {
    expect(await listed(userUrl('alice', '?metadata=env%3Dprod'))).toEqual(['alice/a1', 'alice/a3']);
    expect(await listed(userUrl('alice', '?metadata=env%3Dprod&metadata=env%3Ddev'))).toEqual(['alice/a1', 'alice/a2', 'alice/a3']);
    expect(await listed(userUrl('alice', '?metadata=env%3Dprod&metadata=team%3Dy'))).toEqual(['alice/a3']);
    expect(await listed(userUrl('alice', '?metadata=env%3Dprod&metadata=env%3Ddev&metadata=team%3Dx'))).toEqual(['alice/a1', 'alice/a2']);
    expect(await listed(userUrl('alice', '?metadata=env%3Dpro'))).toEqual([]);
    // Split at the first "=": the value may contain one.
    expect(await listed(userUrl('alice', '?metadata=q.example%2Fexpr%3Da%3Db'))).toEqual(['alice/a3']);
    expect(await listed(userUrl('alice', '?metadata=q.example/expr=a=b'))).toEqual(['alice/a3']);
  });

  it('rejects a metadata filter that is not key=value', async () => {
    await expectError(userUrl('alice', '?metadata=env'), 'InvalidParameter', 'metadata');
    await expectError(userUrl('alice', '?metadata=%3Dprod'), 'InvalidParameter', 'metadata');
  });

  it('filters by update time, both bounds exclusive', async () => {
    const after = at(20).toISOString();
    const before = at(50).toISOString();
    expect(await listed(userUrl('alice', `?updatedAfter=${after}`))).toEqual(['alice/a1', 'alice/a2', 'alice/a3']);
    expect(await listed(userUrl('alice', `?updatedBefore=${before}`))).toEqual(['alice/a2', 'alice/a3', 'alice/a4', 'alice/a5']);
    expect(await listed(userUrl('alice', `?updatedAfter=${after}&updatedBefore=${before}`))).toEqual(['alice/a2', 'alice/a3']);
    await expectError(userUrl('alice', '?updatedAfter=yesterday'), 'InvalidParameter', 'updatedAfter');
  });

  it('answers totalCount only when asked', async () => {
    const plain = await t.request({ method: 'GET', url: userUrl('alice', '?pageSize=2') });
    expect(plain.json().totalCount).toBeUndefined();
    const counted = await t.request({ method: 'GET', url: userUrl('alice', '?pageSize=2&includeTotal=true&metadata=env%3Dprod') });
    expect(counted.json()).toMatchObject({ totalCount: 2, sessions: [expect.anything(), expect.anything()] });
    const all = await t.request({ method: 'GET', url: spaceUrl('?includeTotal=true&pageSize=1') });
    expect(all.json().totalCount).toBe(FIXTURES.length);
  });

  it('rejects an unknown query parameter and a bad pageSize', async () => {
    await expectError(userUrl('alice', '?titel=x'), 'InvalidParameter');
    await expectError(userUrl('alice', '?pageSize=101'), 'InvalidParameter', 'pageSize');
    await expectError(userUrl('alice', '?orderBy=title'), 'InvalidParameter', 'orderBy');
  });
});

describe("a space's sessions (admin view)", () => {
  it('lists every user, ordered by (time, user, session)', async () => {
    expect(await listed(spaceUrl())).toEqual(['alice/a1', 'bob/b1', 'alice/a2', 'bob/a1', 'alice/a3', 'carol/c1', 'alice/a4', 'alice/a5']);
    expect(await listed(spaceUrl('?orderBy=createTime&order=asc'))).toEqual(['alice/a1', 'alice/a2', 'alice/a3', 'alice/a4', 'alice/a5', 'bob/b1', 'bob/a1', 'carol/c1']);
  });

  it('filters by userId and sessionId, each repeatable', async () => {
    expect(await listed(spaceUrl('?userId=bob&userId=carol'))).toEqual(['bob/b1', 'bob/a1', 'carol/c1']);
    expect(await listed(spaceUrl('?sessionId=a1'))).toEqual(['alice/a1', 'bob/a1']);
    expect(await listed(spaceUrl('?sessionId=a1&sessionId=c1&userId=bob&userId=carol'))).toEqual(['bob/a1', 'carol/c1']);
    expect(await listed(spaceUrl('?title=Plan%20a%20trip&metadata=env%3Dprod'))).toEqual(['alice/a1', 'bob/b1']);
  });

  it('rejects more than the allowed values of one filter, naming it', async () => {
    const many = (name: string) => Array.from({ length: 101 }, (_, i) => `${name}=v${i}`).join('&');
    await expectError(spaceUrl(`?${many('userId')}`), 'InvalidParameter', 'userId');
    await expectError(spaceUrl(`?${many('sessionId')}`), 'InvalidParameter', 'sessionId');
    await expectError(userUrl('alice', `?${Array.from({ length: 101 }, (_, i) => `metadata=env%3Dv${i}`).join('&')}`), 'InvalidParameter', 'metadata');
    await expectError(spaceUrl('?userId=a%20b'), 'InvalidParameter', 'userId[0]');
  });

  it('rejects more than 10 filters combined', async () => {
    const keys = Array.from({ length: 11 }, (_, i) => `metadata=k${i}%3Dv`).join('&');
    await expectError(spaceUrl(`?${keys}`), 'InvalidParameter', 'metadata');
    const ten = Array.from({ length: 10 }, (_, i) => `metadata=k${i}%3Dv`).join('&');
    expect(await listed(spaceUrl(`?${ten}`))).toEqual([]);
  });
});

describe('paging', () => {
  async function walk(url: (query: string) => string, query: string, pageSize: number, between?: (page: number) => Promise<void>) {
    const seen: string[] = [];
    let token: string | undefined;
    for (let page = 0; page < 100; page++) {
      const res = await t.request({ method: 'GET', url: url(`?pageSize=${pageSize}${query}${token ? `&pageToken=${token}` : ''}`) });
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body.sessions.length).toBeLessThanOrEqual(pageSize);
      seen.push(...body.sessions.map((session: { userId: string; sessionId: string }) => `${session.userId}/${session.sessionId}`));
      token = body.nextPageToken;
      if (!token) return seen;
      await between?.(page);
    }
    throw new Error('paging did not end');
  }

  it('walks the fixed lists in the same order as one big page', async () => {
    for (const query of ['', '&orderBy=createTime', '&order=asc', '&metadata=env%3Dprod']) {
      expect(await walk(spaceUrl, query, 3)).toEqual(await listed(spaceUrl(`?pageSize=100${query}`)));
      expect(await walk((q) => userUrl('alice', q), query, 2)).toEqual(await listed(userUrl('alice', `?pageSize=100${query}`)));
    }
  });

  it('visits every session exactly once while sessions are being inserted', async () => {
    const busy = await insertSpace(t.db, t.account.accountId);
    const key = (userId: string, sessionId: string) => ({ accountId: t.account.accountId, spaceId: busy, userId, sessionId });
    const existing: string[] = [];
    for (let i = 0; i < 40; i++) {
      const userId = `u${i % 3}`;
      await insertSession(t.db, key(userId, `s${String(i).padStart(2, '0')}`));
      existing.push(`${userId}/s${String(i).padStart(2, '0')}`);
    }
    const url = (query: string) => `/v1/spaces/${busy}/sessions${query}`;
    for (const order of ['', '&order=asc&orderBy=createTime']) {
      let added = 0;
      const seen = await walk(url, order, 7, async () => {
        // New sessions land at both ends of the keyset while the walk is under way.
        await Promise.all([
          insertSession(t.db, key('u0', `new-${order.length}-${added++}`)),
          t.request({ method: 'POST', url: `/v1/spaces/${busy}/users/u1/sessions`, payload: { sessionId: `api-${order.length}-${added++}` } }),
        ]);
      });
      expect(new Set(seen).size).toBe(seen.length);
      for (const item of existing) expect(seen).toContain(item);
    }
  });

  it('rejects a token used with other filters or order, or a forged one', async () => {
    const first = await t.request({ method: 'GET', url: spaceUrl('?pageSize=2&metadata=env%3Dprod') });
    const token = first.json().nextPageToken as string;
    expect(token).toEqual(expect.any(String));
    await expectError(spaceUrl(`?pageSize=2&metadata=env%3Ddev&pageToken=${token}`), 'InvalidParameter.PageToken', 'pageToken');
    await expectError(spaceUrl(`?pageSize=2&metadata=env%3Dprod&order=asc&pageToken=${token}`), 'InvalidParameter.PageToken', 'pageToken');
    await expectError(userUrl('alice', `?pageSize=2&metadata=env%3Dprod&pageToken=${token}`), 'InvalidParameter.PageToken', 'pageToken');
    await expectError(spaceUrl(`?pageSize=2&metadata=env%3Dprod&pageToken=${token.slice(0, -3)}xyz`), 'InvalidParameter.PageToken', 'pageToken');
    // A different page size is the same query.
    const next = await t.request({ method: 'GET', url: spaceUrl(`?pageSize=5&metadata=env%3Dprod&pageToken=${token}`) });
    expect(next.statusCode).toBe(200);
  });
});

describe('isolation and errors', () => {
  it('never lists expired sessions', async () => {
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('space_id', '=', spaceId).where('session_id', '=', 'a3').where('user_id', '=', 'alice').execute();
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() + 3600_000) }).where('space_id', '=', spaceId).where('session_id', '=', 'a2').where('user_id', '=', 'alice').execute();
    try {
      expect(await listed(userUrl('alice'))).toEqual(['alice/a1', 'alice/a2', 'alice/a4', 'alice/a5']);
      const counted = await t.request({ method: 'GET', url: spaceUrl('?includeTotal=true') });
      expect(counted.json().totalCount).toBe(FIXTURES.length - 1);
      expect(counted.json().sessions.map((s: { sessionId: string; userId: string }) => `${s.userId}/${s.sessionId}`)).not.toContain('alice/a3');
    } finally {
      await t.db.updateTable('sessions').set({ expire_time: null }).where('space_id', '=', spaceId).execute();
    }
  });

  it("answers 404 for another account's space and an unknown one", async () => {
    const other = await t.createAccount();
    await insertSession(t.db, { accountId: other.accountId, spaceId: other.defaultSpaceId, userId: 'alice', sessionId: 'theirs' });
    await expectError(`/v1/spaces/${other.defaultSpaceId}/sessions`, 'ResourceNotFound.SessionSpace');
    await expectError(`/v1/spaces/${other.defaultSpaceId}/users/alice/sessions`, 'ResourceNotFound.SessionSpace');
    await expectError('/v1/spaces/space-00000000-0000-0000-0000-000000000000/sessions', 'ResourceNotFound.SessionSpace');
    // The other account sees its own, and not ours.
    const theirs = await t.request({ method: 'GET', url: `/v1/spaces/${other.defaultSpaceId}/sessions`, token: other.rootCredential.token });
    expect(theirs.json().sessions.map((s: { sessionId: string }) => s.sessionId)).toEqual(['theirs']);
  });

  it('rejects a bad userId or spaceId in the path, naming it', async () => {
    await expectError(userUrl('a%20b'), 'InvalidParameter', 'userId');
    await expectError(userUrl('u'.repeat(129)), 'InvalidParameter', 'userId');
    await expectError('/v1/spaces/not-a-space/sessions', 'InvalidParameter', 'spaceId');
  });
});
