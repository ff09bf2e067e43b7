// Sub-accounts, policies and credentials written straight into the database, so access-control
// tests need not go through the IAM API to set up the principals they exercise.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import type { Database } from '../../src/db/connect.js';
import { upsertCredential } from '../../src/modules/accounts/accounts.repository.js';
import { type IssuedCredential, hashSecretKey, issueCredential } from '../../src/modules/accounts/credentials.js';
import type { PolicyStatementValue } from '../../src/lib/policy.js';
import { encryptSecret } from '../../src/modules/accounts/secret-box.js';

export interface TestSubAccount {
  accountId: string;
  principalId: string;
  credential: IssuedCredential;
}

/** A new credential for an existing principal (the root's is `root`). */
export async function insertCredential(db: Database, accountId: string, principalId: string, masterKey?: Buffer): Promise<IssuedCredential> {
  const credential = issueCredential();
  const secretEncrypted = masterKey ? encryptSecret(masterKey, credential.secretKey) : null;
  await upsertCredential(db, { accountId, principalId, secretId: credential.secretId, secretHash: hashSecretKey(credential.secretKey), secretEncrypted });
  return credential;
}

export async function disableCredential(db: Database, secretId: string): Promise<void> {
  await db.updateTable('credentials').set({ status: 'disabled' }).where('secret_id', '=', secretId).execute();
}

/** Replaces (or sets) a sub-account's policy. */
export async function putPolicyRow(db: Database, accountId: string, principalId: string, statements: PolicyStatementValue[]): Promise<void> {
  await db
    .insertInto('policies')
    .values({ account_id: accountId, principal_id: principalId, statements: JSON.stringify(statements) })
    .onConflict((oc) => oc.columns(['account_id', 'principal_id']).doUpdateSet({ statements: JSON.stringify(statements) }))
    .execute();
}

/** A sub-account with one enabled credential and, when statements are given, a policy. */
export async function insertSubAccount(
  db: Database,
  accountId: string,
  options: { name?: string; statements?: PolicyStatementValue[]; masterKey?: Buffer } = {},
): Promise<TestSubAccount> {
  const principalId = `sub-${randomUUID()}`;
  await db
    .insertInto('principals')
    .values({ account_id: accountId, principal_id: principalId, kind: 'sub', name: options.name ?? principalId })
    .execute();
  if (options.statements) await putPolicyRow(db, accountId, principalId, options.statements);
  const credential = await insertCredential(db, accountId, principalId, options.masterKey);
  return { accountId, principalId, credential };
}

// Policies used across the access-control tests.
export const readOnlyOn = (spaceId: string): PolicyStatementValue[] => [
  { effect: 'allow', actions: ['session:Describe*'], resources: [`space/${spaceId}`] },
];
export const fullAccessOn = (spaceId: string): PolicyStatementValue[] => [{ effect: 'allow', actions: ['session:*'], resources: [`space/${spaceId}`] }];
export const everythingExcept = (spaceId: string): PolicyStatementValue[] => [
  { effect: 'allow', actions: ['session:*'], resources: ['space/*'] },
  { effect: 'deny', actions: ['session:*'], resources: [`space/${spaceId}`] },
];

const SNAPSHOT_TABLES = ['session_spaces', 'space_users', 'sessions', 'events', 'principals', 'credentials', 'policies'] as const;

/**
 * Every row of the tenant and IAM tables, as text: two equal snapshots mean a request changed
 * nothing. `last_used_time` is left out because authenticating (even for a refused request) may
 * record it.
 */
export async function databaseSnapshot(db: Database): Promise<Record<string, string[]>> {
  const snapshot: Record<string, string[]> = {};
  for (const table of SNAPSHOT_TABLES) {
    const result = await sql<{ row: string }>`SELECT (to_jsonb(t) - 'last_used_time')::text AS row FROM ${sql.table(table)} t ORDER BY 1`.execute(db);
    snapshot[table] = result.rows.map((r) => r.row);
  }
  return snapshot;
}
