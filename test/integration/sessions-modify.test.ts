import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const DEPLOYMENT = 'ags.tencentcloud.com/deployment-id';
const AFFINITY = 'ags.tencentcloud.com/affinity-id';

let counter = 0;
/** A fresh session through the API; answers its URL, key and the created body. */
async function newSession(payload: Record<string, unknown> = {}) {
  const spaceId = await insertSpace(t.db, t.account.accountId);
  const key = { spaceId, userId: 'user-1', sessionId: `s-${++counter}` };
  const res = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/user-1/sessions`, payload: { sessionId: key.sessionId, ...payload } });
  expect(res.statusCode, res.body).toBe(201);
  return { ...key, url: `/v1/spaces/${spaceId}/users/user-1/sessions/${key.sessionId}`, created: res.json() };
}

type Key = { spaceId: string; userId: string; sessionId: string };

async function row(key: Key) {
  return t.db
    .selectFrom('sessions')
    .selectAll()
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .executeTakeFirst();
}

async function sessionCount(key: Key) {
  const user = await t.db.selectFrom('space_users').select('session_count').where('space_id', '=', key.spaceId).where('user_id', '=', key.userId).executeTakeFirst();
  return user?.session_count;
}

async function insertEvents(key: Key, count: number) {
  for (let seq = 1; seq <= count; seq++) {
    await t.db
      .insertInto('events')
      .values({
        account_id: t.account.accountId,
        ...{ space_id: key.spaceId, user_id: key.userId, session_id: key.sessionId },
        seq,
        event_id: `e${seq}`,
        author: 'user',
        event_time: new Date(),
        payload_hash: Buffer.alloc(32),
      })
      .execute();
  }
}

async function eventCount(key: Key) {
  const events = await t.db.selectFrom('events').select('seq').where('space_id', '=', key.spaceId).where('session_id', '=', key.sessionId).execute();
  return events.length;
}

async function expectError(res: { statusCode: number; json(): { error: { code: string; details?: { issues?: unknown[] } } } }, status: number, code: string, field?: string) {
  expect(res.statusCode).toBe(status);
  expect(res.json().error.code).toBe(code);
  if (field) expect(res.json().error.details?.issues).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
}

describe('GET …/sessions/{sessionId}', () => {
  it('answers the session with its ETag', async () => {
    const s = await newSession({ title: 't', state: { a: 1 } });
    const res = await t.request({ method: 'GET', url: s.url });
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe('"1"');
    expect(res.json()).toEqual(s.created);
  });

  it('answers 404 ResourceNotFound.Session for a missing session, SessionSpace for a missing space', async () => {
    const s = await newSession();
    await expectError(await t.request({ method: 'GET', url: `${s.url}-nope` }), 404, 'ResourceNotFound.Session');
    await expectError(await t.request({ method: 'GET', url: `/v1/spaces/space-00000000-0000-0000-0000-000000000000/users/user-1/sessions/${s.sessionId}` }), 404, 'ResourceNotFound.SessionSpace');
  });
});

describe('PATCH …/sessions/{sessionId}', () => {
  it('changes the title, bumps the revision and the update time', async () => {
    const s = await newSession({ title: 'before' });
    await t.db.updateTable('sessions').set({ update_time: new Date('2026-01-01T00:00:00.000Z') }).where('session_id', '=', s.sessionId).execute();
    const res = await t.request({ method: 'PATCH', url: s.url, payload: { title: 'after' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers.etag).toBe('"2"');
    expect(res.json()).toMatchObject({ title: 'after', revision: 2, createTime: s.created.createTime });
    expect(Date.parse(res.json().updateTime)).toBeGreaterThan(Date.parse('2026-01-01T00:00:00.000Z'));
    expect(await row(s)).toMatchObject({ title: 'after', revision: 2 });
  });

  it('applies metadata as a merge patch: null removes a key', async () => {
    const s = await newSession({ metadata: { env: 'prod', team: 'x', gone: 'soon' } });
    const res = await t.request({ method: 'PATCH', url: s.url, payload: { metadata: { env: 'dev', gone: null, added: '' } } });
    expect(res.statusCode).toBe(200);
    expect(res.json().metadata).toEqual({ env: 'dev', team: 'x', added: '' });
    expect((await row(s))!.metadata).toEqual({ env: 'dev', team: 'x', added: '' });
  });

  it('sets the memo and the expiry, and clears them', async () => {
    const s = await newSession();
    const set = await t.request({ method: 'PATCH', url: s.url, payload: { memo: { summary: 'so far' }, ttlSeconds: 600 } });
    expect(set.json()).toMatchObject({ memo: { summary: 'so far' }, revision: 2 });
    expect(Date.parse(set.json().expireTime)).toBeGreaterThan(Date.now() + 500_000);
    const cleared = await t.request({ method: 'PATCH', url: s.url, payload: { memo: null, expireTime: null } });
    expect(cleared.json()).toMatchObject({ memo: null, expireTime: null, revision: 3 });
    expect(await row(s)).toMatchObject({ memo: null, expire_time: null, revision: 3 });
  });

  it('honours a matching If-Match, and answers 412 with the current revision on a mismatch, changing nothing', async () => {
    const s = await newSession({ title: 'v1' });
    const ok = await t.request({ method: 'PATCH', url: s.url, headers: { 'if-match': '"1"' }, payload: { title: 'v2' } });
    expect(ok.statusCode).toBe(200);
    const stale = await t.request({ method: 'PATCH', url: s.url, headers: { 'if-match': '"1"' }, payload: { title: 'v3', metadata: { env: 'x' } } });
    await expectError(stale, 412, 'FailedOperation.PreconditionFailed');
    expect(stale.json().error.details).toEqual({ currentRevision: 2 });
    expect(await row(s)).toMatchObject({ title: 'v2', metadata: {}, revision: 2 });
    const weak = await t.request({ method: 'PATCH', url: s.url, headers: { 'if-match': 'W/"2"' }, payload: { title: 'v3' } });
    expect(weak.statusCode).toBe(200);
    await expectError(await t.request({ method: 'PATCH', url: s.url, headers: { 'if-match': 'yesterday' }, payload: { title: 'v4' } }), 400, 'InvalidParameter', 'If-Match');
    expect(await row(s)).toMatchObject({ title: 'v3', revision: 3 });
  });

  it('rejects an empty patch, unknown fields and bad values, changing nothing', async () => {
    const s = await newSession({ title: 'same' });
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: {} }), 400, 'InvalidParameter', 'body');
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: { state: {} } }), 400, 'InvalidParameter');
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: { title: 'x'.repeat(257) } }), 400, 'InvalidParameter', 'title');
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: { expireTime: null, ttlSeconds: 5 } }), 400, 'InvalidParameter', 'ttlSeconds');
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: { metadata: { 'Bad/key': 'v' } } }), 400, 'InvalidParameter.Metadata', 'metadata.Bad/key');
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: { memo: { big: 'x'.repeat(65 * 1024) } } }), 400, 'InvalidParameter', 'memo');
    expect(await row(s)).toMatchObject({ title: 'same', metadata: {}, memo: null, expire_time: null, revision: 1 });
  });
});

describe('reserved metadata namespace through PATCH', () => {
  const initial = { [DEPLOYMENT]: 'd1', [AFFINITY]: 'a1', env: 'prod' };

  async function rejected(payload: Record<string, unknown>, field: string) {
    const s = await newSession({ metadata: initial });
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload }), 400, 'InvalidParameter.Metadata', field);
    expect(await row(s)).toMatchObject({ metadata: initial, revision: 1 });
  }

  async function accepted(payload: Record<string, unknown>, expected: Record<string, string>) {
    const s = await newSession({ metadata: initial });
    const res = await t.request({ method: 'PATCH', url: s.url, payload });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().metadata).toEqual(expected);
    expect(await row(s)).toMatchObject({ metadata: expected, revision: 2 });
  }

  it('rejects an unknown reserved key', () => rejected({ metadata: { 'ags.tencentcloud.com/region': 'x' } }, 'metadata.ags.tencentcloud.com/region'));
  it('rejects an affinity id without a deployment id', () => rejected({ metadata: { [DEPLOYMENT]: null } }, `metadata.${AFFINITY}`));
  it('rejects switching the deployment while keeping the old affinity', () => rejected({ metadata: { [DEPLOYMENT]: 'd2' } }, `metadata.${AFFINITY}`));
  it('accepts removing both', () => accepted({ metadata: { [DEPLOYMENT]: null, [AFFINITY]: null } }, { env: 'prod' }));
  it('accepts switching the deployment and replacing the affinity', () =>
    accepted({ metadata: { [DEPLOYMENT]: 'd2', [AFFINITY]: 'a2' } }, { [DEPLOYMENT]: 'd2', [AFFINITY]: 'a2', env: 'prod' }));
  it('accepts switching the deployment and dropping the affinity', () => accepted({ metadata: { [DEPLOYMENT]: 'd2', [AFFINITY]: null } }, { [DEPLOYMENT]: 'd2', env: 'prod' }));
  it('accepts other changes that leave deployment and affinity alone', () => accepted({ metadata: { env: null } }, { [DEPLOYMENT]: 'd1', [AFFINITY]: 'a1' }));
});

describe('DELETE …/sessions/{sessionId}', () => {
  it('deletes the session and its events, and uncounts it', async () => {
    const s = await newSession();
    await insertEvents(s, 3);
    expect(await eventCount(s)).toBe(3);
    const res = await t.request({ method: 'DELETE', url: s.url });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe('');
    expect(await row(s)).toBeUndefined();
    expect(await eventCount(s)).toBe(0);
    expect(await sessionCount(s)).toBe(0);
    await expectError(await t.request({ method: 'GET', url: s.url }), 404, 'ResourceNotFound.Session');
    await expectError(await t.request({ method: 'DELETE', url: s.url }), 404, 'ResourceNotFound.Session');
  });

  it('answers 412 on an If-Match mismatch and deletes nothing', async () => {
    const s = await newSession();
    await insertEvents(s, 2);
    await t.request({ method: 'PATCH', url: s.url, payload: { title: 'changed' } });
    const res = await t.request({ method: 'DELETE', url: s.url, headers: { 'if-match': '"1"' } });
    await expectError(res, 412, 'FailedOperation.PreconditionFailed');
    expect(res.json().error.details).toEqual({ currentRevision: 2 });
    expect(await row(s)).toMatchObject({ revision: 2 });
    expect(await eventCount(s)).toBe(2);
    expect(await sessionCount(s)).toBe(1);
    expect((await t.request({ method: 'DELETE', url: s.url, headers: { 'if-match': '"2"' } })).statusCode).toBe(204);
  });
});

describe('expired sessions', () => {
  it('are not found, cannot be changed, and a create with the same id starts afresh', async () => {
    const s = await newSession({ title: 'old', state: { old: true } });
    await insertEvents(s, 2);
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('session_id', '=', s.sessionId).execute();

    await expectError(await t.request({ method: 'GET', url: s.url }), 404, 'ResourceNotFound.Session');
    await expectError(await t.request({ method: 'PATCH', url: s.url, payload: { title: 'x' } }), 404, 'ResourceNotFound.Session');
    await expectError(await t.request({ method: 'DELETE', url: s.url }), 404, 'ResourceNotFound.Session');
    expect(await row(s)).toMatchObject({ title: 'old', revision: 1 });

    const again = await t.request({ method: 'POST', url: `/v1/spaces/${s.spaceId}/users/user-1/sessions`, payload: { sessionId: s.sessionId, title: 'new' } });
    expect(again.statusCode).toBe(201);
    expect(again.json()).toMatchObject({ title: 'new', state: {}, revision: 1, eventCount: 0, expireTime: null });
    expect(await eventCount(s)).toBe(0);
    expect(await sessionCount(s)).toBe(1);
    expect((await t.request({ method: 'GET', url: s.url })).json()).toEqual(again.json());
  });

  it('a session expiring in the future is still there', async () => {
    const s = await newSession({ ttlSeconds: 3600 });
    expect((await t.request({ method: 'GET', url: s.url })).statusCode).toBe(200);
  });
});

describe('isolation and path validation', () => {
  it("answers 404 for another account's session on every route, changing nothing", async () => {
    const s = await newSession({ title: 'mine' });
    const other = await t.createAccount();
    const as = { token: other.rootCredential.token };
    for (const res of [
      await t.request({ method: 'GET', url: s.url, ...as }),
      await t.request({ method: 'PATCH', url: s.url, payload: { title: 'theirs' }, ...as }),
      await t.request({ method: 'DELETE', url: s.url, ...as }),
      await t.request({ method: 'POST', url: `/v1/spaces/${s.spaceId}/users/user-1/sessions`, payload: { sessionId: s.sessionId }, ...as }),
      await t.request({ method: 'GET', url: `/v1/spaces/${s.spaceId}/users/user-1/sessions`, ...as }),
      await t.request({ method: 'GET', url: `/v1/spaces/${s.spaceId}/sessions`, ...as }),
    ]) {
      await expectError(res, 404, 'ResourceNotFound.SessionSpace');
    }
    expect(await row(s)).toMatchObject({ title: 'mine', revision: 1 });
    expect(await sessionCount(s)).toBe(1);
  });

  it('rejects a bad sessionId or userId in the path with 400 naming it', async () => {
    const s = await newSession({ title: 'kept' });
    const base = `/v1/spaces/${s.spaceId}/users`;
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const payload = method === 'PATCH' ? { title: 'x' } : undefined;
      await expectError(await t.request({ method, url: `${base}/user-1/sessions/a%20b`, payload }), 400, 'InvalidParameter', 'sessionId');
      await expectError(await t.request({ method, url: `${base}/user-1/sessions/${'s'.repeat(129)}`, payload }), 400, 'InvalidParameter', 'sessionId');
      await expectError(await t.request({ method, url: `${base}/a%20b/sessions/${s.sessionId}`, payload }), 400, 'InvalidParameter', 'userId');
    }
    expect(await row(s)).toMatchObject({ title: 'kept', revision: 1 });
  });
});
