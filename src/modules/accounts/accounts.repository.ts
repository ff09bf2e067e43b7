import { type Transaction, sql } from 'kysely';
import { lockUntilTransactionEnds } from '../../db/advisory-lock.js';
import { transactionRetryingConflicts } from '../../db/conflict-retry.js';
import type { Database, Executor } from '../../db/connect.js';
import type { CredentialRow, DB, PolicyStatementRow, PrincipalsTable } from '../../db/schema.js';
import { NOW_MS } from '../../db/sql-fragments.js';

import { type ListedCredential, LISTED_CREDENTIAL_COLUMNS, ROOT_PRINCIPAL_ID } from './credential.model.js';

/** Inserts the account unless its name is taken; answers whether it was inserted. */
export async function insertAccountIfAbsent(trx: Transaction<DB>, accountId: string, name: string): Promise<boolean> {
  const inserted = await trx
    .insertInto('accounts')
    .values({ account_id: accountId, name })
    .onConflict((oc) => oc.column('name').doNothing())
    .returning('account_id')
    .executeTakeFirst();
  return inserted !== undefined;
}

export async function insertRootPrincipal(trx: Transaction<DB>, accountId: string): Promise<void> {
  await trx
    .insertInto('principals')
    .values({ account_id: accountId, principal_id: ROOT_PRINCIPAL_ID, kind: 'root', name: 'root' })
    .execute();
}

export async function insertDefaultSpace(trx: Transaction<DB>, accountId: string, spaceId: string): Promise<void> {
  await trx
    .insertInto('session_spaces')
    .values({ account_id: accountId, space_id: spaceId, name: 'default', is_default: true })
    .execute();
}

/** A credential as listed: never the hash nor the encrypted copy. */

export interface NewCredential {
  accountId: string;
  principalId: string;
  secretId: string;
  secretHash: Buffer;
  /** The secret key encrypted under CREDENTIAL_MASTER_KEY, when the service has one. */
  secretEncrypted: Buffer | null;
}

const credentialValues = (credential: NewCredential) => ({
  secret_id: credential.secretId,
  account_id: credential.accountId,
  principal_id: credential.principalId,
  secret_hash: credential.secretHash,
  secret_encrypted: credential.secretEncrypted,
});

export async function insertCredential(db: Executor, credential: NewCredential): Promise<ListedCredential> {
  return db.insertInto('credentials').values(credentialValues(credential)).returning(LISTED_CREDENTIAL_COLUMNS).executeTakeFirstOrThrow();
}

/** Inserts the credential, or re-enables it with the new secret if this account already has its id. */
export async function upsertCredential(
  db: Executor,
  credential: Omit<NewCredential, 'secretEncrypted'> & { secretEncrypted?: Buffer | null },
): Promise<void> {
  const values = credentialValues({ ...credential, secretEncrypted: credential.secretEncrypted ?? null });
  await db
    .insertInto('credentials')
    .values(values)
    .onConflict((oc) =>
      oc
        .column('secret_id')
        .doUpdateSet({ secret_hash: values.secret_hash, secret_encrypted: values.secret_encrypted, status: 'enabled' })
        .where('credentials.account_id', '=', credential.accountId),
    )
    .execute();
}

export async function findAccountByName(db: Database, name: string) {
  return db.selectFrom('accounts').selectAll().where('name', '=', name).executeTakeFirst();
}

export interface CredentialWithPolicy {
  secret_id: string;
  account_id: string;
  principal_id: string;
  secret_hash: Buffer;
  /** The AES-256-GCM copy of the secret key (secret-box.ts), for signature checks; null if made without a master key. */
  secret_encrypted: Buffer | null;
  status: CredentialRow['status'];
  last_used_time: Date | null;
  kind: PrincipalsTable['kind'];
  statements: PolicyStatementRow[] | null;
}

/**
 * The credential with its principal's kind and policy: one round trip authenticates and
 * authorizes. It runs on every request, hence two choices for speed: SQL text (building and
 * compiling it with the query builder cost more CPU than the rest of its client side), and
 * subqueries rather than joins (PostgreSQL plans them in half the time, and planning is most of
 * the cost of so small a query). The principal exists while its credential does (foreign key).
 */
export async function findCredential(db: Database, secretId: string): Promise<CredentialWithPolicy | undefined> {
  const result = await sql<CredentialWithPolicy>`
    SELECT c.secret_id, c.account_id, c.principal_id, c.secret_hash, c.secret_encrypted, c.status, c.last_used_time,
           (SELECT kind FROM principals p WHERE p.account_id = c.account_id AND p.principal_id = c.principal_id) AS kind,
           (SELECT statements FROM policies p WHERE p.account_id = c.account_id AND p.principal_id = c.principal_id) AS statements
    FROM credentials c
    WHERE c.secret_id = ${secretId}
  `.execute(db);
  return result.rows[0];
}

/** Every account with how many credentials (root and sub-accounts) it holds; never a secret. */
export async function listAccountsWithCredentialCounts(db: Database) {
  return db
    .selectFrom('accounts')
    .leftJoin('credentials', 'credentials.account_id', 'accounts.account_id')
    .select((eb) => ['accounts.account_id', 'accounts.name', 'accounts.create_time', eb.fn.count<number>('credentials.secret_id').as('credential_count')])
    .groupBy(['accounts.account_id', 'accounts.name', 'accounts.create_time'])
    .orderBy('accounts.create_time')
    .orderBy('accounts.account_id')
    .execute();
}

/**
 * The transaction of every IAM write of an account: its sub-accounts, their policies, its
 * credentials, through the API and the admin CLI's root-key rotation alike. On Citus these tables
 * are reference tables, and a write locks its rows on every node's copy: two writes of one account
 * at once could take those locks in opposite orders, and eight at once deadlocked about half the
 * time (test/integration/iam-concurrent-writes.test.ts). A transaction-scoped advisory lock on the
 * account makes its IAM writes take turns — they are few and short, and another account's never
 * waits for it. A deadlock the lock does not order (with another account's write) runs the
 * transaction again (db/conflict-retry.ts).
 */
export function transactionUnderIamLock<T>(db: Database, accountId: string, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return transactionRetryingConflicts(db, async (trx) => {
    await lockUntilTransactionEnds(trx, ['iam-writes', accountId]);
    return work(trx);
  });
}

/** Deletes the root credentials of an account except `keepSecretId`; answers the deleted ids. */
export async function deleteRootCredentialsExcept(trx: Transaction<DB>, accountId: string, keepSecretId: string): Promise<string[]> {
  const deleted = await trx
    .deleteFrom('credentials')
    .where('account_id', '=', accountId)
    .where('principal_id', '=', ROOT_PRINCIPAL_ID)
    .where('secret_id', '<>', keepSecretId)
    .returning('secret_id')
    .execute();
  return deleted.map((row) => row.secret_id);
}

/** How stale last_used_time may get: writing it on every request would turn each read into a write. */
export const LAST_USED_RESOLUTION_SECONDS = 60;

/**
 * Records a use of the credential unless one was recorded within the last minute. The condition
 * is repeated in SQL so that concurrent requests with one credential write it once.
 */
export async function touchCredentialLastUsed(db: Database, secretId: string): Promise<void> {
  await db
    .updateTable('credentials')
    .set({ last_used_time: NOW_MS })
    .where('secret_id', '=', secretId)
    .where((eb) =>
      eb.or([
        eb('last_used_time', 'is', null),
        eb('last_used_time', '<', sql<Date>`now() - make_interval(secs => ${LAST_USED_RESOLUTION_SECONDS})`),
      ]),
    )
    .execute();
}
