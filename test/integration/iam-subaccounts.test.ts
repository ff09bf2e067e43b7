import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const SUB_ID = /^sub-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

async function freshAccount(): Promise<{ account: CreatedAccount; token: string }> {
  const account = await t.createAccount();
  return { account, token: account.rootCredential.token };
}

async function createSub(token: string, name = 'agent'): Promise<string> {
  const res = await t.request({ method: 'POST', url: '/v1/iam/subaccounts', token, payload: { name } });
  expect(res.statusCode).toBe(201);
  return res.json().subAccountId;
}

const principalRows = (accountId: string) =>
  t.db.selectFrom('principals').selectAll().where('account_id', '=', accountId).where('kind', '=', 'sub').orderBy('principal_id').execute();
const policyRows = (accountId: string) => t.db.selectFrom('policies').selectAll().where('account_id', '=', accountId).orderBy('principal_id').execute();

const issueFields = (res: { json(): { error: { details?: { issues?: { field: string }[] } } } }) =>
  (res.json().error.details?.issues ?? []).map((issue) => issue.field);

const READ_ONLY = { statements: [{ effect: 'allow', actions: ['session:Describe*'], resources: ['space/*'] }] };

describe('sub-accounts', () => {
  it('creates, describes, lists and deletes a sub-account', async () => {
    const { account, token } = await freshAccount();
    const created = await t.request({ method: 'POST', url: '/v1/iam/subaccounts', token, payload: { name: '  support tool ' } });
    expect(created.statusCode).toBe(201);
    const sub = created.json();
    expect(sub).toEqual({ subAccountId: expect.stringMatching(SUB_ID), name: 'support tool', createTime: expect.stringMatching(TIMESTAMP) });
    expect(await principalRows(account.accountId)).toMatchObject([{ principal_id: sub.subAccountId, kind: 'sub', name: 'support tool' }]);

    const described = await t.request({ method: 'GET', url: `/v1/iam/subaccounts/${sub.subAccountId}`, token });
    expect(described.statusCode).toBe(200);
    expect(described.json()).toEqual(sub);

    const listed = await t.request({ method: 'GET', url: '/v1/iam/subaccounts', token });
    expect(listed.statusCode).toBe(200);
    expect(listed.json()).toEqual({ subAccounts: [sub] });

    const deleted = await t.request({ method: 'DELETE', url: `/v1/iam/subaccounts/${sub.subAccountId}`, token });
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    expect(await principalRows(account.accountId)).toEqual([]);
    for (const method of ['GET', 'DELETE'] as const) {
      const gone = await t.request({ method, url: `/v1/iam/subaccounts/${sub.subAccountId}`, token });
      expect(gone.statusCode).toBe(404);
      expect(gone.json().error.code).toBe('ResourceNotFound.SubAccount');
    }
    // The root principal is never listed as a sub-account.
    expect((await t.request({ method: 'GET', url: '/v1/iam/subaccounts', token })).json()).toEqual({ subAccounts: [] });
  });

  it('pages through sub-accounts oldest first with a bound token', async () => {
    const { token } = await freshAccount();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await createSub(token, `sub ${i}`));
    const seen: string[] = [];
    let pageToken: string | undefined;
    do {
      const res = await t.request({ method: 'GET', url: `/v1/iam/subaccounts?pageSize=2&includeTotal=true${pageToken ? `&pageToken=${pageToken}` : ''}`, token });
      expect(res.statusCode).toBe(200);
      expect(res.json().subAccounts.length).toBeLessThanOrEqual(2);
      expect(res.json().totalCount).toBe(5);
      seen.push(...res.json().subAccounts.map((s: { subAccountId: string }) => s.subAccountId));
      pageToken = res.json().nextPageToken;
    } while (pageToken);
    expect(seen).toEqual(ids);

    const spacesPage = await t.request({ method: 'GET', url: '/v1/spaces?pageSize=1', token });
    expect(spacesPage.statusCode).toBe(200);
    const foreign = await t.request({ method: 'GET', url: `/v1/iam/subaccounts?pageToken=${'x'.repeat(10)}`, token });
    expect(foreign.statusCode).toBe(400);
    expect(foreign.json().error.code).toBe('InvalidParameter.PageToken');
    for (const query of ['pageSize=0', 'pageSize=101', 'name=x']) {
      const res = await t.request({ method: 'GET', url: `/v1/iam/subaccounts?${query}`, token });
      expect(res.statusCode, query).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter');
    }
  });

  it.each([
    ['empty name', { name: '' }, 'InvalidParameter', 'name'],
    ['whitespace name', { name: '   ' }, 'InvalidParameter', 'name'],
    ['name too long', { name: 'x'.repeat(129) }, 'InvalidParameter', 'name'],
    ['missing name', {}, 'MissingParameter', 'name'],
    ['unknown field', { name: 'ok', accountId: 'acct-x' }, 'InvalidParameter', 'body'],
  ])('refuses a create with %s and writes nothing', async (_case, payload, code, field) => {
    const { account, token } = await freshAccount();
    const res = await t.request({ method: 'POST', url: '/v1/iam/subaccounts', token, payload });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe(code);
    expect(issueFields(res)).toEqual([field]);
    expect(await principalRows(account.accountId)).toEqual([]);
  });

  it('refuses malformed sub-account ids in paths, the root included', async () => {
    const { token } = await freshAccount();
    for (const url of ['/v1/iam/subaccounts/root', '/v1/iam/subaccounts/sub-x/policy', '/v1/iam/subaccounts/nope/credentials']) {
      const res = await t.request({ method: 'GET', url, token });
      expect(res.statusCode, url).toBe(400);
      expect(issueFields(res)).toEqual(['subAccountId']);
    }
  });

  it('revokes the credentials of a deleted sub-account at once, and deletes its policy', async () => {
    const { account, token } = await freshAccount();
    const subAccountId = await createSub(token);
    await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token, payload: READ_ONLY });
    const issued = await t.request({ method: 'POST', url: `/v1/iam/subaccounts/${subAccountId}/credentials`, token });
    expect(issued.statusCode).toBe(201);
    const subToken = issued.json().token;
    const before = await t.request({ method: 'GET', url: '/v1/spaces', token: subToken });
    expect(before.statusCode).not.toBe(401);

    expect((await t.request({ method: 'DELETE', url: `/v1/iam/subaccounts/${subAccountId}`, token })).statusCode).toBe(204);
    const after = await t.request({ method: 'GET', url: '/v1/spaces', token: subToken });
    expect(after.statusCode).toBe(401);
    expect(after.json().error.code).toBe('AuthFailure');
    expect(await t.db.selectFrom('credentials').selectAll().where('principal_id', '=', subAccountId).execute()).toEqual([]);
    expect(await policyRows(account.accountId)).toEqual([]);
  });
});

describe('sub-account policies', () => {
  it('answers an empty policy until one is put, then the policy as put', async () => {
    const { account, token } = await freshAccount();
    const subAccountId = await createSub(token);
    const empty = await t.request({ method: 'GET', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token });
    expect(empty.statusCode).toBe(200);
    expect(empty.json()).toEqual({ statements: [] });

    const put = await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token, payload: READ_ONLY });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toEqual({ ...READ_ONLY, updateTime: expect.stringMatching(TIMESTAMP) });
    expect((await t.request({ method: 'GET', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token })).json()).toEqual(put.json());

    const replacement = {
      statements: [
        { effect: 'allow', actions: ['session:*'], resources: [`space/${account.defaultSpaceId}`] },
        { effect: 'deny', actions: ['session:DeleteSession'], resources: ['*'] },
      ],
    };
    const replaced = await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token, payload: replacement });
    expect(replaced.statusCode).toBe(200);
    expect(replaced.json().statements).toEqual(replacement.statements);
    const rows = await policyRows(account.accountId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ principal_id: subAccountId, statements: replacement.statements });
  });

  const statement = (overrides: Record<string, unknown>) => ({ effect: 'allow', actions: ['session:DescribeSessions'], resources: ['space/*'], ...overrides });

  it.each([
    ['an empty statement list', { statements: [] }, 'statements'],
    ['no statements field', {}, 'statements'],
    ['an unknown action', { statements: [statement({ actions: ['session:DescribeSessions', 'session:Frobnicate'] })] }, 'statements[0].actions[1]'],
    ['a malformed action', { statements: [statement({}), statement({ actions: ['describe sessions'] })] }, 'statements[1].actions[0]'],
    ['a malformed resource', { statements: [statement({ resources: ['space/*', 'spaces/abc'] })] }, 'statements[0].resources[1]'],
    ['an empty action list', { statements: [statement({ actions: [] })] }, 'statements[0].actions'],
    ['an empty resource list', { statements: [statement({ resources: [] })] }, 'statements[0].resources'],
    ['a bad effect', { statements: [statement({ effect: 'permit' })] }, 'statements[0].effect'],
    ['an unknown statement field', { statements: [statement({ condition: {} })] }, 'statements[0]'],
  ])('refuses a policy with %s, naming the field, and writes nothing', async (_case, payload, field) => {
    const { account, token } = await freshAccount();
    const subAccountId = await createSub(token);
    await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token, payload: READ_ONLY });
    const before = await policyRows(account.accountId);

    const res = await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token, payload });
    expect(res.statusCode).toBe(400);
    expect(['InvalidParameter', 'MissingParameter']).toContain(res.json().error.code);
    // A malformed action also matches no known action: the same field may be named twice.
    expect([...new Set(issueFields(res))]).toEqual([field]);
    expect(await policyRows(account.accountId)).toEqual(before);
  });

  it('answers 404 for the policy of a missing sub-account and writes nothing', async () => {
    const { account, token } = await freshAccount();
    const missing = 'sub-00000000-0000-7000-8000-000000000000';
    for (const method of ['GET', 'PUT'] as const) {
      const res = await t.request({ method, url: `/v1/iam/subaccounts/${missing}/policy`, token, ...(method === 'PUT' ? { payload: READ_ONLY } : {}) });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SubAccount');
    }
    expect(await policyRows(account.accountId)).toEqual([]);
  });
});

describe('sub-accounts of another account', () => {
  it('answer 404 on every sub-account route and change nothing', async () => {
    const owner = await freshAccount();
    const other = await freshAccount();
    const subAccountId = await createSub(owner.token);
    await t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${subAccountId}/policy`, token: owner.token, payload: READ_ONLY });
    await t.request({ method: 'POST', url: `/v1/iam/subaccounts/${subAccountId}/credentials`, token: owner.token });
    const snapshot = async () => ({
      principals: await principalRows(owner.account.accountId),
      policies: await policyRows(owner.account.accountId),
      credentials: await t.db.selectFrom('credentials').selectAll().where('account_id', '=', owner.account.accountId).orderBy('secret_id').execute(),
    });
    const before = await snapshot();

    const base = `/v1/iam/subaccounts/${subAccountId}`;
    const calls = [
      { method: 'GET', url: base },
      { method: 'DELETE', url: base },
      { method: 'GET', url: `${base}/policy` },
      { method: 'PUT', url: `${base}/policy`, payload: { statements: [{ effect: 'allow', actions: ['*'], resources: ['*'] }] } },
      { method: 'GET', url: `${base}/credentials` },
      { method: 'POST', url: `${base}/credentials` },
    ] as const;
    for (const call of calls) {
      const res = await t.request({ ...call, token: other.token });
      expect(res.statusCode, `${call.method} ${call.url}`).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SubAccount');
    }
    const listed = await t.request({ method: 'GET', url: '/v1/iam/subaccounts', token: other.token });
    expect(listed.json()).toEqual({ subAccounts: [] });
    expect(await snapshot()).toEqual(before);
  });
});
