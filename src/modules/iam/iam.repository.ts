// Queries on sub-accounts, their policies and credentials. Every query is scoped by account_id.
import { type Transaction, type Selectable, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB, PoliciesTable, PolicyStatementRow, PrincipalsTable } from '../../db/schema.js';
import { NOW_MS } from '../../db/sql-fragments.js';
import { type ListedCredential, LISTED_CREDENTIAL_COLUMNS, ROOT_PRINCIPAL_ID } from '../accounts/index.js';

export type PrincipalRow = Selectable<PrincipalsTable>;
export type PolicyRow = Selectable<PoliciesTable>;


export async function insertSubAccount(db: Executor, accountId: string, principalId: string, name: string): Promise<PrincipalRow> {
  return db
    .insertInto('principals')
    .values({ account_id: accountId, principal_id: principalId, kind: 'sub', name })
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * One page of sub-accounts in id order. Ids are `sub-<UUIDv7>`, so id order is creation order and
 * the primary key serves the keyset.
 */
export async function listSubAccounts(db: Executor, accountId: string, afterId: string | undefined, limit: number): Promise<PrincipalRow[]> {
  let query = db.selectFrom('principals').selectAll().where('account_id', '=', accountId).where('kind', '=', 'sub');
  if (afterId !== undefined) query = query.where('principal_id', '>', afterId);
  return query.orderBy('principal_id').limit(limit).execute();
}

export async function countSubAccounts(db: Executor, accountId: string): Promise<number> {
  const row = await db
    .selectFrom('principals')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', accountId)
    .where('kind', '=', 'sub')
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** `lock: 'share'` keeps the sub-account from being deleted until the transaction ends. */
export async function findSubAccount(db: Executor, accountId: string, principalId: string, lock?: 'share'): Promise<PrincipalRow | undefined> {
  let query = db.selectFrom('principals').selectAll().where('account_id', '=', accountId).where('principal_id', '=', principalId).where('kind', '=', 'sub');
  if (lock === 'share') query = query.forShare();
  return query.executeTakeFirst();
}

/** Deletes the sub-account; its credentials and policy go with it (ON DELETE CASCADE). */
export async function deleteSubAccount(db: Executor, accountId: string, principalId: string): Promise<boolean> {
  const deleted = await db
    .deleteFrom('principals')
    .where('account_id', '=', accountId)
    .where('principal_id', '=', principalId)
    .where('kind', '=', 'sub')
    .returning('principal_id')
    .executeTakeFirst();
  return deleted !== undefined;
}

export async function upsertPolicy(trx: Transaction<DB>, accountId: string, principalId: string, statements: PolicyStatementRow[]): Promise<PolicyRow> {
  const json = JSON.stringify(statements);
  return trx
    .insertInto('policies')
    .values({ account_id: accountId, principal_id: principalId, statements: json, update_time: NOW_MS })
    .onConflict((oc) =>
      // excluded.update_time, not NOW_MS again: Citus refuses a function that is not IMMUTABLE in the
      // DO UPDATE SET of a distributed (here reference) table; the value is the same.
      oc.columns(['account_id', 'principal_id']).doUpdateSet({ statements: json, update_time: (eb) => eb.ref('excluded.update_time') }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function findPolicy(db: Executor, accountId: string, principalId: string): Promise<PolicyRow | undefined> {
  return db.selectFrom('policies').selectAll().where('account_id', '=', accountId).where('principal_id', '=', principalId).executeTakeFirst();
}

/** A principal's credentials, oldest first (served by credentials_by_principal). */
export async function listCredentials(db: Executor, accountId: string, principalId: string): Promise<ListedCredential[]> {
  return db
    .selectFrom('credentials')
    .select(LISTED_CREDENTIAL_COLUMNS)
    .where('account_id', '=', accountId)
    .where('principal_id', '=', principalId)
    .orderBy('create_time')
    .orderBy('secret_id')
    .execute();
}

export async function findCredentialOfAccount(db: Executor, accountId: string, secretId: string): Promise<ListedCredential | undefined> {
  return db.selectFrom('credentials').select(LISTED_CREDENTIAL_COLUMNS).where('account_id', '=', accountId).where('secret_id', '=', secretId).executeTakeFirst();
}

/**
 * Locks the account's root principal row. Every change that may leave the root without an enabled
 * credential takes this lock first, so two concurrent disables cannot each see the other's
 * credential as the one that remains.
 */
export async function lockRootPrincipal(trx: Transaction<DB>, accountId: string): Promise<void> {
  await trx
    .selectFrom('principals')
    .select('principal_id')
    .where('account_id', '=', accountId)
    .where('principal_id', '=', ROOT_PRINCIPAL_ID)
    .forUpdate()
    .execute();
}

/** Whether the root has an enabled credential other than `exceptSecretId`. */
export async function hasOtherEnabledRootCredential(trx: Transaction<DB>, accountId: string, exceptSecretId: string): Promise<boolean> {
  const row = await trx
    .selectFrom('credentials')
    .select(sql`1`.as('one'))
    .where('account_id', '=', accountId)
    .where('principal_id', '=', ROOT_PRINCIPAL_ID)
    .where('status', '=', 'enabled')
    .where('secret_id', '<>', exceptSecretId)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

export async function updateCredentialStatus(
  trx: Transaction<DB>,
  accountId: string,
  secretId: string,
  status: 'enabled' | 'disabled',
): Promise<ListedCredential | undefined> {
  return trx
    .updateTable('credentials')
    .set({ status })
    .where('account_id', '=', accountId)
    .where('secret_id', '=', secretId)
    .returning(LISTED_CREDENTIAL_COLUMNS)
    .executeTakeFirst();
}

export async function deleteCredential(trx: Transaction<DB>, accountId: string, secretId: string): Promise<boolean> {
  const deleted = await trx.deleteFrom('credentials').where('account_id', '=', accountId).where('secret_id', '=', secretId).returning('secret_id').executeTakeFirst();
  return deleted !== undefined;
}
