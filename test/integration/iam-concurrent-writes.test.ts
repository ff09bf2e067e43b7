// IAM writes of one account at once, and of two accounts at once, all go through. On Citus the IAM
// tables are reference tables with a copy on every node: before the writes of an account took turns
// (accounts.service.ts, inIamWriteTransaction), eight of them at once answered 503 about half the time
// (40P01 deadlocks on the copies: 63 of 120 in one run of this race), and a root-key rotation of the
// admin CLI beside them failed with a deadlock until it took the same lock.
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type CreatedAccount, rotateRootCredential } from '../../src/modules/accounts/accounts.service.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const READ_ONLY = { statements: [{ effect: 'allow', actions: ['session:Describe*'], resources: ['space/*'] }] };
const ROUNDS = 8;

async function twoSubAccounts(token: string): Promise<string[]> {
  const created = await Promise.all(['a', 'b'].map((name) => t.request({ method: 'POST', url: '/v1/iam/subaccounts', token, payload: { name } })));
  expect(created.map((res) => res.statusCode)).toEqual([201, 201]);
  return created.map((res) => res.json().subAccountId as string);
}

/** Eight IAM writes of the account at once: two policy puts per sub-account, a credential of each, a sub-account, a root credential. */
async function writeAtOnce(account: CreatedAccount, subs: string[]) {
  const token = account.rootCredential.token;
  const put = (sub: string) => t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${sub}/policy`, token, payload: READ_ONLY });
  return Promise.all([
    ...subs.flatMap((sub) => [put(sub), put(sub)]),
    ...subs.map((sub) => t.request({ method: 'POST', url: `/v1/iam/subaccounts/${sub}/credentials`, token })),
    t.request({ method: 'POST', url: '/v1/iam/subaccounts', token, payload: { name: 'c' } }),
    t.request({ method: 'POST', url: '/v1/iam/credentials', token }),
  ]);
}

it('runs eight IAM writes of each of two accounts at once, round after round: every one answered 2xx and stored', { timeout: 120_000 }, async () => {
  for (let round = 0; round < ROUNDS; round++) {
    const accounts = await Promise.all([t.createAccount(), t.createAccount()]);
    const subs = await Promise.all(accounts.map((account) => twoSubAccounts(account.rootCredential.token)));
    const answers = await Promise.all(accounts.map((account, i) => writeAtOnce(account, subs[i]!)));
    for (const results of answers) {
      expect(results.map((res) => `${res.statusCode} ${res.statusCode >= 300 ? res.body : ''}`.trim())).toEqual(['200', '200', '200', '200', '201', '201', '201', '201']);
    }
    for (const [i, account] of accounts.entries()) {
      const policies = await t.db.selectFrom('policies').select('principal_id').where('account_id', '=', account.accountId).orderBy('principal_id').execute();
      expect(policies.map((row) => row.principal_id)).toEqual([...subs[i]!].sort());
      const principals = await t.db.selectFrom('principals').select('kind').where('account_id', '=', account.accountId).where('kind', '=', 'sub').execute();
      expect(principals).toHaveLength(3);
      const credentials = await t.db.selectFrom('credentials').select('principal_id').where('account_id', '=', account.accountId).execute();
      // The root's first credential and the one made here; one for each of the two sub-accounts.
      expect(credentials.map((row) => row.principal_id).sort()).toEqual(['root', 'root', ...subs[i]!].sort());
    }
  }
});

it("rotates an account's root key twice (the admin CLI, keeping the old keys) while the API makes eight IAM writes of it: every one goes through", { timeout: 120_000 }, async () => {
  for (let round = 0; round < ROUNDS; round++) {
    const account = await t.createAccount();
    const subs = await twoSubAccounts(account.rootCredential.token);
    const rotate = () => rotateRootCredential(t.db, account.name, { keepOld: true });
    const [answers, ...rotations] = await Promise.all([writeAtOnce(account, subs), rotate(), rotate()]);
    expect(answers.map((res) => `${res.statusCode} ${res.statusCode >= 300 ? res.body : ''}`.trim())).toEqual(['200', '200', '200', '200', '201', '201', '201', '201']);
    expect(rotations.map((rotated) => rotated.revokedSecretIds)).toEqual([[], []]);
    const roots = await t.db.selectFrom('credentials').select('secret_id').where('account_id', '=', account.accountId).where('principal_id', '=', 'root').execute();
    // The first root credential, the API's, and one per rotation.
    const rootIds = roots.map((row) => row.secret_id);
    expect(rootIds).toHaveLength(4);
    expect(rootIds).toEqual(expect.arrayContaining([account.rootCredential.secretId, ...rotations.map((rotated) => rotated.rootCredential.secretId)]));
  }
});
