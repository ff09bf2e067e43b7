import type { Transaction } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';

export const ROOT_PRINCIPAL_ID = 'root';

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

export async function upsertCredential(
  db: Database | Transaction<DB>,
  credential: { accountId: string; principalId: string; secretId: string; secretHash: Buffer },
): Promise<void> {
  await db
    .insertInto('credentials')
    .values({
      secret_id: credential.secretId,
      account_id: credential.accountId,
      principal_id: credential.principalId,
      secret_hash: credential.secretHash,
    })
    .onConflict((oc) =>
      oc
        .column('secret_id')
        .doUpdateSet({ secret_hash: credential.secretHash, status: 'enabled' })
        .where('credentials.account_id', '=', credential.accountId),
    )
    .execute();
}

export async function findAccountByName(db: Database, name: string) {
  return db.selectFrom('accounts').selectAll().where('name', '=', name).executeTakeFirst();
}

export async function findCredential(db: Database, secretId: string) {
  return db
    .selectFrom('credentials')
    .innerJoin('principals', (join) =>
      join.onRef('principals.account_id', '=', 'credentials.account_id').onRef('principals.principal_id', '=', 'credentials.principal_id'),
    )
    // The policy comes with the credential: one round trip authenticates and authorizes.
    .leftJoin('policies', (join) =>
      join.onRef('policies.account_id', '=', 'credentials.account_id').onRef('policies.principal_id', '=', 'credentials.principal_id'),
    )
    .select([
      'credentials.secret_id',
      'credentials.account_id',
      'credentials.principal_id',
      'credentials.secret_hash',
      'credentials.status',
      'credentials.last_used_time',
      'principals.kind',
      'policies.statements',
    ])
    .where('credentials.secret_id', '=', secretId)
    .executeTakeFirst();
}
