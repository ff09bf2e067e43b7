// GET /v1/spaces/{spaceId}/permissions: what the caller may do in a space, from its policy (the
// console shows only what it may offer).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SESSION_ACTIONS } from '../../src/lib/policy.js';
import { insertSpace } from '../support/fixtures.js';
import { insertSubAccount, readOnlyOn } from '../support/principals.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let spaceId: string;
beforeAll(async () => {
  t = await createTestApp();
  spaceId = await insertSpace(t.db, t.account.accountId);
});
afterAll(async () => t?.close());

describe('GET /v1/spaces/{spaceId}/permissions', () => {
  it('answers every session action for the root', async () => {
    const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/permissions` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ spaceId, principalKind: 'root', actions: [...SESSION_ACTIONS] });
  });

  it('answers what a sub-account\'s policy allows on that space, deny winning', async () => {
    const reader = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(spaceId) });
    const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/permissions`, token: reader.credential.token });
    expect(res.json().actions).toEqual(['session:DescribeSessionSpaces', 'session:DescribeSessions', 'session:DescribeEvents']);

    const noDelete = await insertSubAccount(t.db, t.account.accountId, {
      statements: [
        { effect: 'allow', actions: ['session:*'], resources: ['space/*'] },
        { effect: 'deny', actions: ['session:Delete*'], resources: [`space/${spaceId}`] },
      ],
    });
    const limited = (await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/permissions`, token: noDelete.credential.token })).json();
    expect(limited.actions).not.toContain('session:DeleteSession');
    expect(limited.actions).toContain('session:AppendEvent');
  });

  it('is refused to a sub-account that may not see the space', async () => {
    const other = await insertSpace(t.db, t.account.accountId, 'other');
    const outsider = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(other) });
    const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/permissions`, token: outsider.credential.token });
    expect([res.statusCode, res.json().error.code]).toEqual([403, 'UnauthorizedOperation']);
  });
});
