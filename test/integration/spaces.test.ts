import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';
import { newSpaceId } from '../../src/lib/ids.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

/** A fresh account per test keeps lists independent of what other tests created. */
async function freshAccount(): Promise<{ account: CreatedAccount; token: string }> {
  const account = await t.createAccount();
  return { account, token: account.rootCredential.token };
}

async function spaceRows(accountId: string) {
  return t.db.selectFrom('session_spaces').selectAll().where('account_id', '=', accountId).orderBy('space_id').execute();
}

async function listAll(token: string, query: string, pageSize = 100): Promise<string[]> {
  const ids: string[] = [];
  let pageToken: string | undefined;
  do {
    const res = await t.request({ method: 'GET', url: `/v1/spaces?pageSize=${pageSize}${query}${pageToken ? `&pageToken=${pageToken}` : ''}`, token });
    expect(res.statusCode).toBe(200);
    ids.push(...res.json().spaces.map((space: { spaceId: string }) => space.spaceId));
    pageToken = res.json().nextPageToken;
  } while (pageToken);
  return ids;
}

describe('spaces CRUD', () => {
  it('creates, describes, lists, modifies and deletes a space', async () => {
    const { account, token } = await freshAccount();
    const created = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: 'support bot', description: 'tier 1', defaultTtlSeconds: 3600 } });
    expect(created.statusCode).toBe(201);
    const space = created.json();
    expect(space).toEqual({
      spaceId: expect.stringMatching(/^space-[0-9a-f-]{36}$/),
      name: 'support bot',
      description: 'tier 1',
      default: false,
      defaultTtlSeconds: 3600,
      createTime: expect.stringMatching(TIMESTAMP),
      updateTime: space.createTime,
    });
    const [row] = (await spaceRows(account.accountId)).filter((r) => r.space_id === space.spaceId);
    expect(row).toMatchObject({ name: 'support bot', description: 'tier 1', is_default: false, default_ttl_seconds: 3600 });

    const described = await t.request({ method: 'GET', url: `/v1/spaces/${space.spaceId}`, token });
    expect(described.statusCode).toBe(200);
    expect(described.json()).toEqual(space);

    const listed = await t.request({ method: 'GET', url: '/v1/spaces', token });
    expect(listed.statusCode).toBe(200);
    expect(listed.json().spaces.map((s: { spaceId: string }) => s.spaceId)).toEqual([account.defaultSpaceId, space.spaceId]);
    expect(listed.json().nextPageToken).toBeUndefined();
    expect(listed.json().totalCount).toBeUndefined();

    await new Promise((resolve) => setTimeout(resolve, 5));
    const renamed = await t.request({ method: 'PATCH', url: `/v1/spaces/${space.spaceId}`, token, payload: { name: '  billing bot ', defaultTtlSeconds: null } });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toEqual({ ...space, name: 'billing bot', defaultTtlSeconds: null, updateTime: expect.stringMatching(TIMESTAMP) });
    expect(Date.parse(renamed.json().updateTime)).toBeGreaterThan(Date.parse(space.updateTime));

    const described2 = await t.request({ method: 'PATCH', url: `/v1/spaces/${space.spaceId}`, token, payload: { description: '' } });
    expect(described2.json()).toMatchObject({ name: 'billing bot', description: '', defaultTtlSeconds: null });

    const deleted = await t.request({ method: 'DELETE', url: `/v1/spaces/${space.spaceId}`, token });
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect((await spaceRows(account.accountId)).map((r) => r.space_id)).toEqual([account.defaultSpaceId]);
    const gone = await t.request({ method: 'GET', url: `/v1/spaces/${space.spaceId}`, token });
    expect(gone.statusCode).toBe(404);
    expect(gone.json().error.code).toBe('ResourceNotFound.SessionSpace');
    const again = await t.request({ method: 'DELETE', url: `/v1/spaces/${space.spaceId}`, token });
    expect(again.json().error.code).toBe('ResourceNotFound.SessionSpace');
  });

  it('trims the name and defaults the description to empty', async () => {
    const { token } = await freshAccount();
    const name = `  ${'n'.repeat(128)}\t`;
    const res = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name } });
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject({ name: 'n'.repeat(128), description: '', defaultTtlSeconds: null });
  });

  it('lets the default space be renamed but never deleted', async () => {
    const { account, token } = await freshAccount();
    const renamed = await t.request({ method: 'PATCH', url: `/v1/spaces/${account.defaultSpaceId}`, token, payload: { name: 'main' } });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ spaceId: account.defaultSpaceId, name: 'main', default: true });

    const deleted = await t.request({ method: 'DELETE', url: `/v1/spaces/${account.defaultSpaceId}`, token });
    expect(deleted.statusCode).toBe(409);
    expect(deleted.json().error.code).toBe('OperationDenied.DefaultSessionSpaceProtected');
    expect((await spaceRows(account.accountId)).map((r) => r.space_id)).toEqual([account.defaultSpaceId]);
  });
});

describe('spaces validation', () => {
  const issueFields = (res: { json(): { error: { details?: { issues?: { field: string }[] } } } }) =>
    (res.json().error.details?.issues ?? []).map((issue) => issue.field);

  it.each([
    ['empty name', { name: '' }, 'InvalidParameter', 'name'],
    ['whitespace name', { name: '   ' }, 'InvalidParameter', 'name'],
    ['name too long after trimming', { name: ` ${'x'.repeat(129)} ` }, 'InvalidParameter', 'name'],
    ['name not a string', { name: 42 }, 'InvalidParameter', 'name'],
    ['missing name', { description: 'x' }, 'MissingParameter', 'name'],
    ['description too long', { name: 'ok', description: 'd'.repeat(513) }, 'InvalidParameter', 'description'],
    ['ttl zero', { name: 'ok', defaultTtlSeconds: 0 }, 'InvalidParameter', 'defaultTtlSeconds'],
    ['ttl fractional', { name: 'ok', defaultTtlSeconds: 1.5 }, 'InvalidParameter', 'defaultTtlSeconds'],
    ['ttl over ten years', { name: 'ok', defaultTtlSeconds: 10 * 365 * 86400 + 1 }, 'InvalidParameter', 'defaultTtlSeconds'],
  ])('refuses a create with %s and writes nothing', async (_case, payload, code, field) => {
    const { account, token } = await freshAccount();
    const res = await t.request({ method: 'POST', url: '/v1/spaces', token, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(code);
    expect(issueFields(res)).toEqual([field]);
    expect(await spaceRows(account.accountId)).toHaveLength(1);
  });

  it('refuses an unknown body field, naming it, and writes nothing', async () => {
    const { account, token } = await freshAccount();
    const res = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: 'ok', colour: 'blue' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
    expect(res.json().error.message).toContain('colour');
    expect(await spaceRows(account.accountId)).toHaveLength(1);
  });

  it('refuses a bad spaceId in the path on every route', async () => {
    const { token } = await freshAccount();
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const res = await t.request({ method, url: '/v1/spaces/not-a-space', token, ...(method === 'PATCH' ? { payload: { name: 'x' } } : {}) });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter');
      expect(issueFields(res)).toEqual(['spaceId']);
    }
  });

  it('refuses a modify that is empty, unknown-field or invalid, and changes nothing', async () => {
    const { account, token } = await freshAccount();
    const spaceId = await insertSpace(t.db, account.accountId, 'keep me');
    const before = await spaceRows(account.accountId);
    for (const [payload, field] of [
      [{}, 'body'],
      [{ name: '  ' }, 'name'],
      [{ default: false }, 'body'],
      [{ defaultTtlSeconds: -1 }, 'defaultTtlSeconds'],
    ] as const) {
      const res = await t.request({ method: 'PATCH', url: `/v1/spaces/${spaceId}`, token, payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter');
      expect(issueFields(res)).toEqual([field]);
    }
    expect(await spaceRows(account.accountId)).toEqual(before);
  });

  it('refuses unknown query parameters and page sizes out of range', async () => {
    const { token } = await freshAccount();
    for (const query of ['namelike=x', 'pageSize=0', 'pageSize=101', 'includeTotal=yes']) {
      const res = await t.request({ method: 'GET', url: `/v1/spaces?${query}`, token });
      expect(res.statusCode, query).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter');
    }
  });
});

describe('spaces list filters and paging', () => {
  it('filters by exact name, nameLike and descriptionLike with %, _ and \\ taken literally', async () => {
    const { account, token } = await freshAccount();
    // Spaces are listed by createTime, then id: each is created in a later millisecond than the one
    // before, so the expected order is the order of creation.
    const make = async (name: string, description = '') => {
      await new Promise((resolve) => setTimeout(resolve, 2));
      return (await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name, description } })).json().spaceId as string;
    };
    const a = await make('alpha', '100% done');
    const b = await make('alpha_beta', '100 percent');
    const c = await make('alphaXbeta', 'a\\b path');
    const d = await make('Alpha', 'under_score');

    expect(await listAll(token, '&name=alpha')).toEqual([a]);
    expect(await listAll(token, '&name=Alph')).toEqual([]);
    expect(await listAll(token, '&nameLike=lpha')).toEqual([a, b, c, d]);
    expect(await listAll(token, '&nameLike=Alph')).toEqual([d]);
    expect(await listAll(token, '&nameLike=a_b')).toEqual([b]);
    expect(await listAll(token, `&nameLike=${encodeURIComponent('%')}`)).toEqual([]);
    expect(await listAll(token, `&descriptionLike=${encodeURIComponent('0%')}`)).toEqual([a]);
    expect(await listAll(token, '&descriptionLike=r_s')).toEqual([d]);
    expect(await listAll(token, '&descriptionLike=_')).toEqual([d]);
    expect(await listAll(token, `&descriptionLike=${encodeURIComponent('a\\b')}`)).toEqual([c]);
    expect(await listAll(token, '&nameLike=alpha&descriptionLike=100')).toEqual([a, b]);
    expect(await listAll(token, '')).toEqual([account.defaultSpaceId, a, b, c, d]);
  });

  it('answers totalCount only when includeTotal=true, counting the filtered set', async () => {
    const { token } = await freshAccount();
    for (let i = 0; i < 5; i++) await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: `team-${i}` } });
    const withTotal = await t.request({ method: 'GET', url: '/v1/spaces?nameLike=team&pageSize=2&includeTotal=true', token });
    expect(withTotal.json().spaces).toHaveLength(2);
    expect(withTotal.json().totalCount).toBe(5);
    expect(typeof withTotal.json().nextPageToken).toBe('string');
    const all = await t.request({ method: 'GET', url: '/v1/spaces?includeTotal=true', token });
    expect(all.json().totalCount).toBe(6);
    const without = await t.request({ method: 'GET', url: '/v1/spaces?nameLike=team&includeTotal=false', token });
    expect(without.json().totalCount).toBeUndefined();
  });

  it('walks every space exactly once while other spaces are inserted concurrently', async () => {
    const { account, token } = await freshAccount();
    // Many spaces share one create_time (one statement), so the space_id tie-break is exercised too.
    const sameInstant = Array.from({ length: 30 }, () => newSpaceId());
    await t.db
      .insertInto('session_spaces')
      .values(sameInstant.map((space_id, i) => ({ account_id: account.accountId, space_id, name: `bulk-${i}` })))
      .execute();
    const oneByOne: string[] = [];
    for (let i = 0; i < 15; i++) oneByOne.push(await insertSpace(t.db, account.accountId, `single-${i}`));
    const existing = [account.defaultSpaceId, ...sameInstant, ...oneByOne];

    const inserts = Promise.all(
      Array.from({ length: 30 }, async (_, i) => {
        const res = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: `concurrent-${i}` } });
        expect(res.statusCode).toBe(201);
        return res.json().spaceId as string;
      }),
    );
    const walk = listAll(token, '', 4);
    const [seen, inserted] = await Promise.all([walk, inserts]);

    expect(new Set(seen).size).toBe(seen.length);
    for (const id of existing) expect(seen.filter((s) => s === id)).toHaveLength(1);
    for (const id of seen) expect([...existing, ...inserted]).toContain(id);
    expect((await listAll(token, '')).length).toBe(existing.length + inserted.length);
  });

  it('refuses a page token reused with other filters, and a garbage token', async () => {
    const { token } = await freshAccount();
    for (let i = 0; i < 3; i++) await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: `p-${i}` } });
    const first = await t.request({ method: 'GET', url: '/v1/spaces?nameLike=p-&pageSize=1', token });
    const pageToken = first.json().nextPageToken as string;
    expect(pageToken).toEqual(expect.any(String));

    const second = await t.request({ method: 'GET', url: `/v1/spaces?nameLike=p-&pageSize=2&pageToken=${pageToken}`, token });
    expect(second.statusCode).toBe(200);
    expect(second.json().spaces).toHaveLength(2);

    for (const url of [
      `/v1/spaces?nameLike=p&pageSize=1&pageToken=${pageToken}`,
      `/v1/spaces?pageSize=1&pageToken=${pageToken}`,
      '/v1/spaces?pageToken=garbage',
      `/v1/spaces?nameLike=p-&pageToken=${pageToken.slice(0, -3)}`,
    ]) {
      const res = await t.request({ method: 'GET', url, token });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter.PageToken');
    }
  });
});

describe('spaces delete rules', () => {
  it('refuses to delete a space holding a session, and keeps it', async () => {
    const { account, token } = await freshAccount();
    const spaceId = await insertSpace(t.db, account.accountId);
    await insertSession(t.db, { accountId: account.accountId, spaceId, userId: 'u1', sessionId: 's1' });
    const res = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}`, token });
    expect(res.statusCode).toBe(409);
    expect(res.json().error.code).toBe('ResourceInUse.SessionSpaceNotEmpty');
    expect((await spaceRows(account.accountId)).map((r) => r.space_id)).toContain(spaceId);
    expect(await t.db.selectFrom('sessions').select('session_id').where('space_id', '=', spaceId).execute()).toHaveLength(1);
  });

  it('refuses to delete a space holding user state or space state', async () => {
    const { account, token } = await freshAccount();
    const withUserState = await insertSpace(t.db, account.accountId);
    await t.db
      .insertInto('space_users')
      .values({ account_id: account.accountId, space_id: withUserState, user_id: 'u1', session_count: 0, state: JSON.stringify({ plan: 'pro' }) })
      .execute();
    const withSpaceState = await insertSpace(t.db, account.accountId);
    await t.db.updateTable('session_spaces').set({ state: JSON.stringify({ locale: 'en' }) }).where('space_id', '=', withSpaceState).execute();

    for (const spaceId of [withUserState, withSpaceState]) {
      const res = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}`, token });
      expect(res.statusCode).toBe(409);
      expect(res.json().error.code).toBe('ResourceInUse.SessionSpaceNotEmpty');
    }
    expect((await spaceRows(account.accountId)).map((r) => r.space_id)).toEqual(expect.arrayContaining([withUserState, withSpaceState]));
    expect(await t.db.selectFrom('space_users').select('user_id').where('space_id', '=', withUserState).execute()).toHaveLength(1);
  });

  it('deletes a space whose users left nothing behind, and one whose sessions have all expired', async () => {
    const { account, token } = await freshAccount();
    const leftovers = await insertSpace(t.db, account.accountId);
    await t.db.insertInto('space_users').values({ account_id: account.accountId, space_id: leftovers, user_id: 'gone', session_count: 0 }).execute();
    const expired = await insertSpace(t.db, account.accountId);
    await insertSession(t.db, { accountId: account.accountId, spaceId: expired, userId: 'u1', sessionId: 'old' });
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 60_000) }).where('space_id', '=', expired).execute();

    for (const spaceId of [leftovers, expired]) {
      const res = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}`, token });
      expect(res.statusCode).toBe(204);
      expect(await t.db.selectFrom('space_users').select('user_id').where('space_id', '=', spaceId).execute()).toEqual([]);
      expect(await t.db.selectFrom('sessions').select('session_id').where('space_id', '=', spaceId).execute()).toEqual([]);
    }
    expect((await spaceRows(account.accountId)).map((r) => r.space_id)).toEqual([account.defaultSpaceId]);
  });
});

describe('spaces across accounts', () => {
  it('answers 404 for another account\'s space on every route and never lists it', async () => {
    const owner = await freshAccount();
    const spaceId = await insertSpace(t.db, owner.account.accountId, 'private');
    const other = await freshAccount();
    const before = await spaceRows(owner.account.accountId);

    const attempts = [
      { method: 'GET' as const, url: `/v1/spaces/${spaceId}` },
      { method: 'PATCH' as const, url: `/v1/spaces/${spaceId}`, payload: { name: 'stolen' } },
      { method: 'DELETE' as const, url: `/v1/spaces/${spaceId}` },
      { method: 'GET' as const, url: `/v1/spaces/${spaceId}/users` },
      { method: 'DELETE' as const, url: `/v1/spaces/${owner.account.defaultSpaceId}` },
    ];
    for (const attempt of attempts) {
      const res = await t.request({ ...attempt, token: other.token });
      expect(res.statusCode, `${attempt.method} ${attempt.url}`).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SessionSpace');
    }
    const unknown = await t.request({ method: 'GET', url: `/v1/spaces/${newSpaceId()}`, token: other.token });
    expect(unknown.json().error.code).toBe('ResourceNotFound.SessionSpace');

    expect(await listAll(other.token, '')).toEqual([other.account.defaultSpaceId]);
    expect(await listAll(other.token, '&name=private')).toEqual([]);
    expect(await spaceRows(owner.account.accountId)).toEqual(before);
  });
});
