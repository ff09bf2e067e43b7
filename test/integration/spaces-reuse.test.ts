// POST /v1/spaces with onNameExists: reuse — the create that maps a name to one space (what the ADK
// session service does with an appName): 201 the first time, 200 with the same space after, and
// one space however many callers race for the name.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tableFingerprints } from '../support/db-snapshot.js';
import { insertSubAccount } from '../support/principals.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

async function spacesNamed(accountId: string, name: string) {
  return t.db.selectFrom('session_spaces').select(['space_id', 'description']).where('account_id', '=', accountId).where('name', '=', name).orderBy('create_time').execute();
}

describe('create a space with onNameExists: reuse', () => {
  it('answers 201 with a new space, then 200 with that same space, unchanged', async () => {
    const { accountId, rootCredential } = await t.createAccount();
    const first = await t.request({ method: 'POST', url: '/v1/spaces', token: rootCredential.token, payload: { name: 'app-a', description: 'first', onNameExists: 'reuse' } });
    expect(first.statusCode).toBe(201);
    const before = await tableFingerprints(t.db);
    const again = await t.request({ method: 'POST', url: '/v1/spaces', token: rootCredential.token, payload: { name: '  app-a ', description: 'second', onNameExists: 'reuse' } });
    expect(again.statusCode).toBe(200);
    expect(again.json()).toEqual(first.json());
    expect(await tableFingerprints(t.db)).toEqual(before);
    expect(await spacesNamed(accountId, 'app-a')).toEqual([{ space_id: first.json().spaceId, description: 'first' }]);
  });

  it('leaves plain creates as they were (names are not unique) and reuses the oldest of several', async () => {
    const { accountId, rootCredential } = await t.createAccount();
    const token = rootCredential.token;
    const plain1 = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: 'dup' } });
    const plain2 = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: 'dup', onNameExists: 'create' } });
    expect([plain1.statusCode, plain2.statusCode]).toEqual([201, 201]);
    expect(plain2.json().spaceId).not.toBe(plain1.json().spaceId);
    const reused = await t.request({ method: 'POST', url: '/v1/spaces', token, payload: { name: 'dup', onNameExists: 'reuse' } });
    expect(reused.statusCode).toBe(200);
    expect(reused.json().spaceId).toBe(plain1.json().spaceId);
    expect(await spacesNamed(accountId, 'dup')).toHaveLength(2);
  });

  it('ends with one space when 24 callers reuse one new name at once', async () => {
    const { accountId, rootCredential } = await t.createAccount();
    const answers = await Promise.all(
      Array.from({ length: 24 }, () => t.request({ method: 'POST', url: '/v1/spaces', token: rootCredential.token, payload: { name: 'raced', onNameExists: 'reuse' } })),
    );
    const statuses = answers.map((answer) => answer.statusCode).sort();
    expect(statuses).toEqual([200, ...Array<number>(22).fill(200), 201].sort());
    const ids = new Set(answers.map((answer) => answer.json().spaceId));
    const rows = await spacesNamed(accountId, 'raced');
    expect(rows).toHaveLength(1);
    expect([...ids]).toEqual([rows[0]!.space_id]);
  });

  it('reuses only a space the sub-account may describe: one it may not is neither shown nor reused', async () => {
    const { accountId, rootCredential } = await t.createAccount();
    const hidden = await t.request({ method: 'POST', url: '/v1/spaces', token: rootCredential.token, payload: { name: 'shared-name' } });
    const sub = await insertSubAccount(t.db, accountId, {
      statements: [
        { effect: 'allow', actions: ['session:CreateSessionSpace', 'session:DescribeSessionSpaces'], resources: ['space/*'] },
        { effect: 'deny', actions: ['session:DescribeSessionSpaces'], resources: [`space/${hidden.json().spaceId}`] },
      ],
    });
    const own = await t.request({ method: 'POST', url: '/v1/spaces', token: sub.credential.token, payload: { name: 'shared-name', onNameExists: 'reuse' } });
    expect(own.statusCode).toBe(201);
    expect(own.json().spaceId).not.toBe(hidden.json().spaceId);
    const again = await t.request({ method: 'POST', url: '/v1/spaces', token: sub.credential.token, payload: { name: 'shared-name', onNameExists: 'reuse' } });
    expect(again.statusCode).toBe(200);
    expect(again.json().spaceId).toBe(own.json().spaceId);
  });

  it('rejects another onNameExists value naming the field, and writes nothing', async () => {
    const { rootCredential } = await t.createAccount();
    const before = await tableFingerprints(t.db);
    const res = await t.request({ method: 'POST', url: '/v1/spaces', token: rootCredential.token, payload: { name: 'x', onNameExists: 'replace' } });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
    expect(JSON.stringify(res.json().error.details)).toContain('onNameExists');
    expect(await tableFingerprints(t.db)).toEqual(before);
  });
});
