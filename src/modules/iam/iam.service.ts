// Sub-accounts, their policies and the credentials of the root and of sub-accounts. Everything is
// scoped to the caller's account: another account's sub-account or credential answers the same
// 404 as a missing one.
import type { Transaction } from 'kysely';
import type { Database, Executor } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import type { PageTokens } from '../../lib/page-token.js';
import { uuidv7 } from '../../lib/ids.js';
import { ROOT_PRINCIPAL_ID, inIamWriteTransaction, storeNewCredential } from '../accounts/index.js';
import {
  countSubAccounts,
  deleteCredential as deleteCredentialRow,
  deleteSubAccount as deleteSubAccountRow,
  findCredentialOfAccount,
  findPolicy,
  findSubAccount,
  hasOtherEnabledRootCredential,
  insertSubAccount,
  listCredentials,
  listSubAccounts,
  lockRootPrincipal,
  updateCredentialStatus,
  upsertPolicy,
} from './iam.repository.js';
import {
  type CredentialView,
  type IssuedCredentialView,
  type ListSubAccountsInput,
  type SubAccountPolicyView,
  type SubAccountView,
  toCredentialView,
  toPolicyView,
  toSubAccountView,
} from './iam.schemas.js';
import type { PolicyStatementValue } from '../../lib/policy.js';

/** `sub-<UUIDv7>`: time-ordered, so listing in id order is listing in creation order. */
const newSubAccountId = (): string => `sub-${uuidv7()}`;

const subAccountNotFound = (subAccountId: string) => new AppError('ResourceNotFound.SubAccount', `Sub-account ${subAccountId} was not found.`);
const credentialNotFound = (secretId: string) => new AppError('ResourceNotFound.Credential', `Credential ${secretId} was not found.`);

async function findSubAccountOrThrow(db: Executor, accountId: string, subAccountId: string, lock?: 'share') {
  const row = await findSubAccount(db, accountId, subAccountId, lock);
  if (!row) throw subAccountNotFound(subAccountId);
  return row;
}

export async function createSubAccount(db: Database, accountId: string, name: string): Promise<SubAccountView> {
  return toSubAccountView(await inIamWriteTransaction(db, accountId, (trx) => insertSubAccount(trx, accountId, newSubAccountId(), name)));
}

export async function describeSubAccount(db: Database, accountId: string, subAccountId: string): Promise<SubAccountView> {
  return toSubAccountView(await findSubAccountOrThrow(db, accountId, subAccountId));
}

export interface SubAccountPage {
  subAccounts: SubAccountView[];
  nextPageToken?: string;
  totalCount?: number;
}

export async function listSubAccountsPage(db: Database, tokens: PageTokens, accountId: string, input: ListSubAccountsInput): Promise<SubAccountPage> {
  const tokenQuery = { list: 'subaccounts', accountId };
  const afterId = input.pageToken ? tokens.decode(input.pageToken, tokenQuery, ['id'])[0] : undefined;
  const rows = await listSubAccounts(db, accountId, afterId, input.pageSize + 1);
  const page = rows.slice(0, input.pageSize);
  const last = page.at(-1);
  const result: SubAccountPage = { subAccounts: page.map(toSubAccountView) };
  if (rows.length > input.pageSize && last) result.nextPageToken = tokens.encode(tokenQuery, [last.principal_id]);
  if (input.includeTotal) result.totalCount = await countSubAccounts(db, accountId);
  return result;
}

/** Its credentials and its policy are deleted with it (ON DELETE CASCADE): they stop working at once. */
export async function deleteSubAccount(db: Database, accountId: string, subAccountId: string): Promise<void> {
  if (!(await inIamWriteTransaction(db, accountId, (trx) => deleteSubAccountRow(trx, accountId, subAccountId)))) throw subAccountNotFound(subAccountId);
}

export async function putPolicy(db: Database, accountId: string, subAccountId: string, statements: PolicyStatementValue[]): Promise<SubAccountPolicyView> {
  const row = await inIamWriteTransaction(db, accountId, async (trx) => {
    // FOR SHARE: a concurrent delete of the sub-account waits, rather than the upsert failing on its FK.
    await findSubAccountOrThrow(trx, accountId, subAccountId, 'share');
    return upsertPolicy(trx, accountId, subAccountId, statements);
  });
  return toPolicyView(row);
}

export async function getPolicy(db: Database, accountId: string, subAccountId: string): Promise<SubAccountPolicyView> {
  await findSubAccountOrThrow(db, accountId, subAccountId);
  return toPolicyView(await findPolicy(db, accountId, subAccountId));
}

/**
 * Issues a credential for the root (`subAccountId` undefined) or a sub-account. The secret key is
 * returned this once; only its SHA-256 hash is stored, plus an AES-256-GCM copy when a master key
 * is configured (for the later signature-based authentication).
 */
export async function createCredential(
  db: Database,
  accountId: string,
  subAccountId: string | undefined,
  masterKey: Buffer | undefined,
): Promise<IssuedCredentialView> {
  const { issued, credential: row } = await inIamWriteTransaction(db, accountId, async (trx) => {
    if (!subAccountId) return storeNewCredential(trx, accountId, ROOT_PRINCIPAL_ID, masterKey);
    await findSubAccountOrThrow(trx, accountId, subAccountId, 'share');
    return storeNewCredential(trx, accountId, subAccountId, masterKey);
  });
  return { secretId: issued.secretId, secretKey: issued.secretKey, token: issued.token, status: row.status, createTime: row.create_time.toISOString() };
}

export async function listCredentialsOf(db: Database, accountId: string, subAccountId: string | undefined): Promise<{ credentials: CredentialView[] }> {
  if (subAccountId) await findSubAccountOrThrow(db, accountId, subAccountId);
  const rows = await listCredentials(db, accountId, subAccountId ?? ROOT_PRINCIPAL_ID);
  return { credentials: rows.map(toCredentialView) };
}

/**
 * Runs `change` on one of the account's credentials. When the credential is the root's, the root
 * principal is locked first and the change is refused if it would leave the root without any
 * enabled credential: an account must not be able to lock itself out.
 */
async function changeCredential<T>(
  db: Database,
  accountId: string,
  secretId: string,
  /** Whether the change stops the credential from authenticating (disable, delete). */
  revokes: boolean,
  change: (trx: Transaction<DB>) => Promise<T>,
): Promise<T> {
  return inIamWriteTransaction(db, accountId, async (trx) => {
    let credential = await findCredentialOfAccount(trx, accountId, secretId);
    if (!credential) throw credentialNotFound(secretId);
    if (credential.principal_id === ROOT_PRINCIPAL_ID) {
      await lockRootPrincipal(trx, accountId);
      // Read again under the lock: a concurrent change may have committed meanwhile.
      credential = await findCredentialOfAccount(trx, accountId, secretId);
      if (!credential) throw credentialNotFound(secretId);
      if (revokes && credential.status === 'enabled' && !(await hasOtherEnabledRootCredential(trx, accountId, secretId))) {
        throw new AppError(
          'OperationDenied.LastRootCredential',
          `Credential ${secretId} is the root's last enabled credential; create another root credential before disabling or deleting it.`,
        );
      }
    }
    return change(trx);
  });
}

export async function modifyCredential(db: Database, accountId: string, secretId: string, status: 'enabled' | 'disabled'): Promise<CredentialView> {
  const row = await changeCredential(
    db,
    accountId,
    secretId,
    status === 'disabled',
    (trx) => updateCredentialStatus(trx, accountId, secretId, status),
  );
  if (!row) throw credentialNotFound(secretId);
  return toCredentialView(row);
}

export async function deleteCredential(db: Database, accountId: string, secretId: string): Promise<void> {
  const deleted = await changeCredential(
    db,
    accountId,
    secretId,
    true,
    (trx) => deleteCredentialRow(trx, accountId, secretId),
  );
  if (!deleted) throw credentialNotFound(secretId);
}
