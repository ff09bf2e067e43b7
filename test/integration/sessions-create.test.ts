import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const sessionsUrl = (spaceId: string, userId = 'user-1') => `/v1/spaces/${spaceId}/users/${userId}/sessions`;

async function sessionRows(spaceId: string) {
  return t.db.selectFrom('sessions').selectAll().where('space_id', '=', spaceId).orderBy('session_id').execute();
}

async function sessionCount(spaceId: string, userId = 'user-1'): Promise<number | undefined> {
  const row = await t.db.selectFrom('space_users').select('session_count').where('space_id', '=', spaceId).where('user_id', '=', userId).executeTakeFirst();
  return row?.session_count;
}

const newSpace = () => insertSpace(t.db, t.account.accountId);

describe('POST …/users/{userId}/sessions', () => {
  it('creates a session: 201, the session, ETag "1", the user counted', async () => {
    const spaceId = await newSpace();
    const res = await t.request({
      method: 'POST',
      url: sessionsUrl(spaceId),
      payload: { sessionId: 's-1', title: 'First', metadata: { env: 'prod' }, state: { step: 1, nested: { a: [1, 2] } } },
    });
    expect(res.statusCode).toBe(201);
    expect(res.headers.etag).toBe('"1"');
    const body = res.json();
    expect(body).toEqual({
      spaceId,
      userId: 'user-1',
      sessionId: 's-1',
      title: 'First',
      metadata: { env: 'prod' },
      state: { step: 1, nested: { a: [1, 2] } },
      memo: null,
      windowStartSeq: 1,
      eventCount: 0,
      revision: 1,
      createTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      updateTime: body.createTime,
      expireTime: null,
    });
    const rows = await sessionRows(spaceId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ account_id: t.account.accountId, title: 'First', metadata: { env: 'prod' }, revision: 1 });
    expect(await sessionCount(spaceId)).toBe(1);
  });

  it('is idempotent: the same id answers 200 with the original session, unchanged', async () => {
    const spaceId = await newSpace();
    const first = await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 'same', title: 'original', state: { v: 1 } } });
    expect(first.statusCode).toBe(201);
    const second = await t.request({
      method: 'POST',
      url: sessionsUrl(spaceId),
      payload: { sessionId: 'same', title: 'other title', metadata: { env: 'dev' }, state: { v: 2 } },
    });
    expect(second.statusCode).toBe(200);
    expect(second.headers.etag).toBe('"1"');
    expect(second.json()).toEqual(first.json());
    const rows = await sessionRows(spaceId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ title: 'original', state: { v: 1 }, metadata: {}, revision: 1 });
    expect(await sessionCount(spaceId)).toBe(1);
  });

  it('20 concurrent creates of one id: one 201, nineteen 200, one row, counted once', async () => {
    const spaceId = await newSpace();
    const responses = await Promise.all(
      Array.from({ length: 20 }, (_, i) => t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 'race', title: `caller ${i}` } })),
    );
    const statuses = responses.map((res) => res.statusCode).sort();
    expect(statuses.filter((status) => status === 201)).toHaveLength(1);
    expect(statuses.filter((status) => status === 200)).toHaveLength(19);
    const winner = responses.find((res) => res.statusCode === 201)!.json();
    for (const res of responses) expect(res.json()).toEqual(winner);
    expect(await sessionRows(spaceId)).toHaveLength(1);
    expect(await sessionCount(spaceId)).toBe(1);
  });

  it('If-None-Match: * answers 412 when the session exists, and changes nothing', async () => {
    const spaceId = await newSpace();
    await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 's', title: 'kept' } });
    const res = await t.request({ method: 'POST', url: sessionsUrl(spaceId), headers: { 'if-none-match': '*' }, payload: { sessionId: 's', title: 'new' } });
    expect(res.statusCode).toBe(412);
    expect(res.json().error).toMatchObject({ code: 'FailedOperation.PreconditionFailed', details: { currentRevision: 1 } });
    const rows = await sessionRows(spaceId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ title: 'kept', revision: 1 });
    expect(await sessionCount(spaceId)).toBe(1);

    const fresh = await t.request({ method: 'POST', url: sessionsUrl(spaceId), headers: { 'if-none-match': '*' }, payload: { sessionId: 'other' } });
    expect(fresh.statusCode).toBe(201);
  });

  it('generates a UUIDv7 session id when none is given, with or without a body', async () => {
    const spaceId = await newSpace();
    const withBody = await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { title: 't' } });
    expect(withBody.statusCode).toBe(201);
    expect(withBody.json().sessionId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const noBody = await t.request({ method: 'POST', url: sessionsUrl(spaceId) });
    expect(noBody.statusCode).toBe(201);
    expect(noBody.json().sessionId).not.toBe(withBody.json().sessionId);
    expect(await sessionRows(spaceId)).toHaveLength(2);
    expect(await sessionCount(spaceId)).toBe(2);
  });

  it('accepts identifiers of 128 characters in the path and the body', async () => {
    const spaceId = await newSpace();
    const userId = 'u'.repeat(128);
    const res = await t.request({ method: 'POST', url: sessionsUrl(spaceId, userId), payload: { sessionId: 's'.repeat(128) } });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ userId, sessionId: 's'.repeat(128) });
  });

  it('sets the expiry from ttlSeconds, expireTime, or the space default', async () => {
    const spaceId = await newSpace();
    const before = Date.now();
    const ttl = await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 'ttl', ttlSeconds: 3600 } });
    expect(ttl.statusCode).toBe(201);
    const ttlExpiry = Date.parse(ttl.json().expireTime);
    expect(ttlExpiry).toBeGreaterThanOrEqual(before + 3600_000 - 5_000);
    expect(ttlExpiry).toBeLessThanOrEqual(Date.now() + 3600_000 + 5_000);

    const at = new Date(Date.now() + 86_400_000).toISOString();
    const fixed = await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 'fixed', expireTime: at } });
    expect(fixed.json().expireTime).toBe(at);

    await t.db.updateTable('session_spaces').set({ default_ttl_seconds: 60 }).where('space_id', '=', spaceId).execute();
    const defaulted = await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 'defaulted' } });
    const defaultExpiry = Date.parse(defaulted.json().expireTime);
    expect(defaultExpiry).toBeGreaterThan(Date.now() + 50_000);
    expect(defaultExpiry).toBeLessThan(Date.now() + 70_000);
  });
});

describe('POST …/sessions: invalid requests change nothing', () => {
  async function expectRejected(payload: unknown, status: number, code: string, field?: string, options: { url?: string; app?: TestApp } = {}) {
    const app = options.app ?? t;
    const spaceId = await insertSpace(app.db, app.account.accountId);
    const res = await app.request({ method: 'POST', url: options.url ?? sessionsUrl(spaceId), payload: payload as object });
    expect(res.statusCode).toBe(status);
    expect(res.json().error.code).toBe(code);
    if (field) expect(res.json().error.details.issues).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
    expect(await app.db.selectFrom('sessions').select('session_id').where('space_id', '=', spaceId).execute()).toEqual([]);
    expect(await app.db.selectFrom('space_users').select('user_id').where('space_id', '=', spaceId).execute()).toEqual([]);
  }

  it('a title over the limit is 400 naming title', () => expectRejected({ title: 'x'.repeat(257) }, 400, 'InvalidParameter', 'title'));
  it('a state that is not an object is 400 naming state', () => expectRejected({ state: [1, 2] }, 400, 'InvalidParameter', 'state'));
  it('a bad sessionId is 400 naming sessionId', () => expectRejected({ sessionId: 'a b' }, 400, 'InvalidParameter', 'sessionId'));
  it('an unknown field is 400', () => expectRejected({ titel: 'typo' }, 400, 'InvalidParameter'));
  it('a non-string metadata value is 400 naming it', () => expectRejected({ metadata: { env: 1 } }, 400, 'InvalidParameter', 'metadata.env'));
  it('a bad metadata key is 400 InvalidParameter.Metadata naming the key', () =>
    expectRejected({ metadata: { 'bad key': 'v' } }, 400, 'InvalidParameter.Metadata', 'metadata.bad key'));
  it('an unknown key in the reserved namespace is 400 InvalidParameter.Metadata', () =>
    expectRejected({ metadata: { 'ags.tencentcloud.com/other': 'v' } }, 400, 'InvalidParameter.Metadata', 'metadata.ags.tencentcloud.com/other'));
  it('an affinity id without a deployment id is 400 InvalidParameter.Metadata', () =>
    expectRejected({ metadata: { 'ags.tencentcloud.com/affinity-id': 'a1' } }, 400, 'InvalidParameter.Metadata', 'metadata.ags.tencentcloud.com/affinity-id'));
  it('both expireTime and ttlSeconds is 400', () =>
    expectRejected({ expireTime: new Date(Date.now() + 60_000).toISOString(), ttlSeconds: 60 }, 400, 'InvalidParameter', 'ttlSeconds'));
  it('an expireTime in the past is 400 naming expireTime', () => expectRejected({ expireTime: '2020-01-01T00:00:00.000Z' }, 400, 'InvalidParameter', 'expireTime'));
  it('a ttlSeconds of 0 is 400 naming ttlSeconds', () => expectRejected({ ttlSeconds: 0 }, 400, 'InvalidParameter', 'ttlSeconds'));

  it('a userId with a space or of 129 characters in the path is 400 naming userId', async () => {
    const spaceId = await newSpace();
    await expectRejected({}, 400, 'InvalidParameter', 'userId', { url: sessionsUrl(spaceId, 'a%20b') });
    await expectRejected({}, 400, 'InvalidParameter', 'userId', { url: sessionsUrl(spaceId, 'u'.repeat(129)) });
  });

  it('a state over the limit is 413 LimitExceeded.State', async () => {
    const small = await createTestApp({ limits: { stateBytes: 2048 } });
    try {
      await expectRejected({ state: { blob: 'x'.repeat(2100) } }, 413, 'LimitExceeded.State', undefined, { app: small });
      const spaceId = await insertSpace(small.db, small.account.accountId);
      const fits = await small.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { state: { blob: 'x'.repeat(1900) } } });
      expect(fits.statusCode).toBe(201);
    } finally {
      await small.close();
    }
  });

  it("an unknown space, or another account's, is 404 ResourceNotFound.SessionSpace", async () => {
    const other = await t.createAccount();
    const res = await t.request({ method: 'POST', url: sessionsUrl(other.defaultSpaceId), payload: { sessionId: 's' } });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('ResourceNotFound.SessionSpace');
    expect(await t.db.selectFrom('sessions').select('session_id').where('space_id', '=', other.defaultSpaceId).execute()).toEqual([]);
    const missing = await t.request({ method: 'POST', url: sessionsUrl('space-00000000-0000-0000-0000-000000000000'), payload: {} });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe('ResourceNotFound.SessionSpace');
  });
});
