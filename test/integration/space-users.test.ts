import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newSpaceId } from '../../src/lib/ids.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

async function setUpdateTime(spaceId: string, userId: string, sessionId: string, iso: string, expireTime?: Date) {
  await t.db
    .updateTable('sessions')
    .set({ update_time: iso, ...(expireTime ? { expire_time: expireTime } : {}) })
    .where('space_id', '=', spaceId)
    .where('user_id', '=', userId)
    .where('session_id', '=', sessionId)
    .execute();
}

describe('users of a space', () => {
  it('lists users with session counts and last activity, skipping expired sessions and absent users', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const key = (userId: string, sessionId: string) => ({ accountId: t.account.accountId, spaceId, userId, sessionId });
    await insertSession(t.db, key('bob', 'b1'));
    await insertSession(t.db, key('bob', 'b2'));
    await insertSession(t.db, key('bob', 'b3'));
    await setUpdateTime(spaceId, 'bob', 'b1', '2026-01-01T10:00:00.000Z');
    await setUpdateTime(spaceId, 'bob', 'b2', '2026-01-03T10:00:00.123Z');
    // The newest one has expired: it behaves as not found, so it is not the last activity.
    await setUpdateTime(spaceId, 'bob', 'b3', '2026-01-05T10:00:00.000Z', new Date(Date.now() - 1000));
    await insertSession(t.db, key('alice', 'a1'));
    await setUpdateTime(spaceId, 'alice', 'a1', '2026-02-01T00:00:00.000Z', new Date(Date.now() + 3_600_000));
    // User state only: present, but without activity.
    await t.db
      .insertInto('space_users')
      .values({ account_id: t.account.accountId, space_id: spaceId, user_id: 'carol', session_count: 0, state: JSON.stringify({ tier: 'gold' }) })
      .execute();
    // Neither sessions nor state: not a user of the space any more.
    await t.db.insertInto('space_users').values({ account_id: t.account.accountId, space_id: spaceId, user_id: 'dave', session_count: 0 }).execute();
    // Another space's user is not listed.
    const otherSpace = await insertSpace(t.db, t.account.accountId);
    await insertSession(t.db, { accountId: t.account.accountId, spaceId: otherSpace, userId: 'erin', sessionId: 'e1' });

    const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users?includeTotal=true` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      users: [
        { userId: 'alice', sessionCount: 1, lastActivityTime: '2026-02-01T00:00:00.000Z' },
        { userId: 'bob', sessionCount: 3, lastActivityTime: '2026-01-03T10:00:00.123Z' },
        { userId: 'carol', sessionCount: 0, lastActivityTime: null },
      ],
      totalCount: 3,
    });
    const withoutTotal = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users` });
    expect(withoutTotal.json().totalCount).toBeUndefined();
  });

  it('pages through every user exactly once, in userId order', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const userIds = Array.from({ length: 45 }, (_, i) => `user-${String(i).padStart(2, '0')}`);
    for (const userId of [...userIds].reverse()) {
      await insertSession(t.db, { accountId: t.account.accountId, spaceId, userId, sessionId: 's' });
    }

    const seen: string[] = [];
    const pageSizes: number[] = [];
    let pageToken: string | undefined;
    do {
      const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users?pageSize=20${pageToken ? `&pageToken=${pageToken}` : ''}` });
      expect(res.statusCode).toBe(200);
      pageSizes.push(res.json().users.length);
      seen.push(...res.json().users.map((user: { userId: string }) => user.userId));
      pageToken = res.json().nextPageToken;
    } while (pageToken);
    expect(pageSizes).toEqual([20, 20, 5]);
    expect(seen).toEqual(userIds);

    const defaultSize = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users` });
    expect(defaultSize.json().users).toHaveLength(20);
  });

  it('refuses a token of another space, a garbage token and a page size out of range', async () => {
    const spaceA = await insertSpace(t.db, t.account.accountId);
    const spaceB = await insertSpace(t.db, t.account.accountId);
    for (const spaceId of [spaceA, spaceB]) {
      for (const userId of ['u1', 'u2']) await insertSession(t.db, { accountId: t.account.accountId, spaceId, userId, sessionId: 's' });
    }
    const first = await t.request({ method: 'GET', url: `/v1/spaces/${spaceA}/users?pageSize=1` });
    const pageToken = first.json().nextPageToken as string;
    expect(pageToken).toEqual(expect.any(String));

    for (const url of [`/v1/spaces/${spaceB}/users?pageSize=1&pageToken=${pageToken}`, `/v1/spaces/${spaceA}/users?pageToken=nonsense`]) {
      const res = await t.request({ method: 'GET', url });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter.PageToken');
    }
    // A spaces-list token is not a users-list token either.
    const spacesPage = await t.request({ method: 'GET', url: '/v1/spaces?pageSize=1' });
    const spacesToken = spacesPage.json().nextPageToken as string;
    const crossList = await t.request({ method: 'GET', url: `/v1/spaces/${spaceA}/users?pageToken=${spacesToken}` });
    expect(crossList.json().error.code).toBe('InvalidParameter.PageToken');

    const tooBig = await t.request({ method: 'GET', url: `/v1/spaces/${spaceA}/users?pageSize=101` });
    expect(tooBig.statusCode).toBe(400);
    expect(tooBig.json().error.code).toBe('InvalidParameter');
    expect(tooBig.json().error.details.issues[0].field).toBe('pageSize');
  });

  it('answers 404 for an unknown or foreign space and 400 for a malformed one', async () => {
    const other = await t.createAccount();
    const foreignSpace = await insertSpace(t.db, other.accountId);
    await insertSession(t.db, { accountId: other.accountId, spaceId: foreignSpace, userId: 'secret-user', sessionId: 's' });

    for (const spaceId of [foreignSpace, newSpaceId()]) {
      const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users` });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SessionSpace');
      expect(res.body).not.toContain('secret-user');
    }
    const owner = await t.request({ method: 'GET', url: `/v1/spaces/${foreignSpace}/users`, token: other.rootCredential.token });
    expect(owner.json().users.map((user: { userId: string }) => user.userId)).toEqual(['secret-user']);

    const malformed = await t.request({ method: 'GET', url: '/v1/spaces/space-nope/users' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().error.code).toBe('InvalidParameter');
    expect(malformed.json().error.details.issues[0].field).toBe('spaceId');
  });
});
