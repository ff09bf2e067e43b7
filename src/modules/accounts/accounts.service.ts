// Accounts are created by an operator command (or by the embedded mode on first start), never over
// the API. Each account gets its root principal, its default space and one root credential.
import { AppError } from '../../errors.js';
import type { Transaction } from 'kysely';
import type { Database, Executor } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';
import { newAccountId, newSpaceId } from '../../lib/ids.js';
import {
  type CredentialWithPolicy,
  LAST_USED_RESOLUTION_SECONDS,
  deleteRootCredentialsExcept,
  findAccountByName,
  findCredential,
  insertAccountIfAbsent,
  insertCredential,
  insertDefaultSpace,
  insertRootPrincipal,
  listAccountsWithCredentialCounts,
  touchCredentialLastUsed,
  transactionUnderIamLock,
  upsertCredential,
} from './accounts.repository.js';
import type { CredentialCache } from './credential-cache.js';
import { type IssuedCredential, hashSecretKey, issueCredential, parseToken, secretKeyMatches } from './credentials.js';
import type { Principal } from '../../lib/principal.js';
import { encryptSecret } from './secret-box.js';
import { type ListedCredential, ROOT_PRINCIPAL_ID } from './credential.model.js';

/**
 * Issues a new credential of the principal (the account's root, or a sub-account) and stores it:
 * the hash of its secret key, and the key encrypted when a master key is configured (for the later
 * signature-based authentication). Answers the issued secret, shown once, and the stored row.
 */
export async function storeNewCredential(
  db: Executor,
  accountId: string,
  principalId: string,
  masterKey: Buffer | undefined,
): Promise<{ issued: IssuedCredential; credential: ListedCredential }> {
  const issued = issueCredential();
  const credential = await insertCredential(db, {
    accountId,
    principalId,
    secretId: issued.secretId,
    secretHash: hashSecretKey(issued.secretKey),
    secretEncrypted: masterKey ? encryptSecret(masterKey, issued.secretKey) : null,
  });
  return { issued, credential };
}

export const EMBEDDED_ACCOUNT_NAME = 'default';

export interface CreatedAccount {
  accountId: string;
  name: string;
  defaultSpaceId: string;
  rootCredential: IssuedCredential;
}

export class AccountExistsError extends Error {
  override name = 'AccountExistsError';
}

export interface BootstrapOptions {
  /** A `<secretId>.<secretKey>` chosen by the operator (e.g. ROOT_API_KEY) instead of a generated one. */
  pinnedToken?: string;
  /** CREDENTIAL_MASTER_KEY: when set, an AES-256-GCM copy of the secret is stored too. */
  masterKey?: Buffer;
}

const sealed = (masterKey: Buffer | undefined, secretKey: string) => (masterKey ? encryptSecret(masterKey, secretKey) : null);

/** Creates an account with its root principal, default space and a root credential. */
export async function createAccount(db: Database, name: string, { pinnedToken, masterKey }: BootstrapOptions = {}): Promise<CreatedAccount> {
  const credential = pinnedToken ? pinnedCredential(pinnedToken) : issueCredential();
  const accountId = newAccountId();
  const defaultSpaceId = newSpaceId();
  await db.transaction().execute(async (trx) => {
    if (!(await insertAccountIfAbsent(trx, accountId, name))) throw new AccountExistsError(`account "${name}" already exists`);
    await insertRootPrincipal(trx, accountId);
    await insertDefaultSpace(trx, accountId, defaultSpaceId);
    await upsertCredential(trx, {
      accountId,
      principalId: ROOT_PRINCIPAL_ID,
      secretId: credential.secretId,
      secretHash: hashSecretKey(credential.secretKey),
      secretEncrypted: sealed(masterKey, credential.secretKey),
    });
  });
  return { accountId, name, defaultSpaceId, rootCredential: credential };
}

/**
 * Embedded mode: makes sure the `default` account exists. Answers the new account (whose root
 * credential is shown once) only when this call created it. A pinned ROOT_API_KEY is (re)installed
 * on every start so that development and compose setups can rely on it.
 */
export async function ensureEmbeddedAccount(db: Database, options: BootstrapOptions = {}): Promise<CreatedAccount | undefined> {
  const { pinnedToken, masterKey } = options;
  const existing = await findAccountByName(db, EMBEDDED_ACCOUNT_NAME);
  if (!existing) {
    try {
      return await createAccount(db, EMBEDDED_ACCOUNT_NAME, options);
    } catch (error) {
      if (!(error instanceof AccountExistsError)) throw error; // another instance won the race
      return undefined;
    }
  }
  if (pinnedToken) {
    const { secretId, secretKey } = pinnedCredential(pinnedToken);
    await upsertCredential(db, {
      accountId: existing.account_id,
      principalId: ROOT_PRINCIPAL_ID,
      secretId,
      secretHash: hashSecretKey(secretKey),
      secretEncrypted: sealed(masterKey, secretKey),
    });
  }
  return undefined;
}

function pinnedCredential(token: string): IssuedCredential {
  const parsed = parseToken(token);
  if (!parsed) throw new Error('the pinned root key must be <secretId>.<secretKey> (AKID + 32 base62 characters, ".", ≥43 base64url characters)');
  return { ...parsed, token };
}

const BEARER = /^Bearer ([^\s]+)$/i;

/**
 * Resolves `Authorization: Bearer <secretId>.<secretKey>` to a principal, or fails with AuthFailure.
 * With a cache (on, i.e. listening) a known credential costs no round trip: the cached entry holds
 * the stored hash, and the presented key is checked against it exactly as against the row. A miss
 * reads the row (one round trip) and caches it. Recording the use costs one more write at most once
 * a minute per credential, as without a cache.
 */
export async function authenticate(db: Database, authorization: string | undefined, cache?: CredentialCache): Promise<Principal> {
  if (!authorization) throw new AppError('AuthFailure', 'Missing Authorization header: send "Authorization: Bearer <secretId>.<secretKey>".');
  const token = BEARER.exec(authorization)?.[1];
  const parsed = token ? parseToken(token) : undefined;
  if (!parsed) throw new AppError('AuthFailure', 'Malformed credential: expected "Authorization: Bearer <secretId>.<secretKey>".');
  const credential = await lookUpCredential(db, parsed.secretId, cache);
  // One message for unknown, disabled and wrong keys: the answer must not tell which ids exist.
  if (!credential || credential.status !== 'enabled' || !secretKeyMatches(credential.secret_hash, parsed.secretKey)) {
    throw new AppError('AuthFailure', 'The credential is unknown, disabled or wrong.');
  }
  await recordUse(db, credential.secret_id, credential.last_used_time, cache);
  return principalOf(credential);
}

/** The principal a verified credential acts as. */
export function principalOf(credential: CredentialWithPolicy): Principal {
  return {
    accountId: credential.account_id,
    principalId: credential.principal_id,
    kind: credential.kind,
    secretId: credential.secret_id,
    statements: credential.kind === 'root' ? [] : (credential.statements ?? []),
  };
}

/**
 * The stored credential of `secretId` (from the cache when it holds it), whatever its status; the
 * caller verifies it. The other authentication (TC3 signatures, modules/tencent) reads it here too.
 */
export async function lookUpCredential(db: Database, secretId: string, cache: CredentialCache | undefined): Promise<CredentialWithPolicy | undefined> {
  return cache?.get(secretId) ?? (await readCredential(db, secretId, cache));
}

/** Records a verified credential's use (at most one write a minute per credential). */
export async function recordCredentialUse(db: Database, credential: CredentialWithPolicy, cache: CredentialCache | undefined): Promise<void> {
  await recordUse(db, credential.secret_id, credential.last_used_time, cache);
}

/** The row for a cache miss; cached whatever its status or the presented key (unknown ids are not). */
async function readCredential(db: Database, secretId: string, cache: CredentialCache | undefined): Promise<CredentialWithPolicy | undefined> {
  const ticket = cache?.beginFill();
  const credential = await findCredential(db, secretId);
  if (credential && cache && ticket !== undefined) cache.set(credential, ticket);
  return credential;
}

export class AccountNotFoundError extends Error {
  override name = 'AccountNotFoundError';
}

export interface AccountSummary {
  accountId: string;
  name: string;
  createTime: string;
  credentialCount: number;
}

/** For the operator: every account and how many credentials it holds. No secret, no hash. */
export async function listAccounts(db: Database): Promise<AccountSummary[]> {
  const rows = await listAccountsWithCredentialCounts(db);
  return rows.map((row) => ({
    accountId: row.account_id,
    name: row.name,
    createTime: row.create_time.toISOString(),
    credentialCount: Number(row.credential_count),
  }));
}

export interface RotatedRootCredential {
  accountId: string;
  name: string;
  rootCredential: IssuedCredential;
  /** secretIds of the previous root credentials deleted by the rotation (none with keepOld). */
  revokedSecretIds: string[];
}

/**
 * Runs `work` as one of the account's IAM writes, which take turns (accounts.repository.ts,
 * transactionUnderIamLock): the iam module's writes and the root-key rotation below.
 */
export function inIamWriteTransaction<T>(db: Database, accountId: string, work: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return transactionUnderIamLock(db, accountId, work);
}

/**
 * Issues a new root credential for the account named `name` and, unless `keepOld`, deletes its
 * previous root credentials in the same transaction: there is never a moment without a working
 * root credential, and the old ones stop working the moment the new one exists.
 */
export async function rotateRootCredential(
  db: Database,
  name: string,
  options: { keepOld?: boolean; masterKey?: Buffer | undefined } = {},
): Promise<RotatedRootCredential> {
  const credential = issueCredential();
  const account = await findAccountByName(db, name);
  if (!account) throw new AccountNotFoundError(`no account named "${name}"`);
  // Under the account's IAM lock: two rotations, or a rotation and an API credential change, take
  // turns (on Citus they would otherwise deadlock on the credentials table's copies).
  return inIamWriteTransaction(db, account.account_id, async (trx) => {
    await insertCredential(trx, {
      accountId: account.account_id,
      principalId: ROOT_PRINCIPAL_ID,
      secretId: credential.secretId,
      secretHash: hashSecretKey(credential.secretKey),
      secretEncrypted: sealed(options.masterKey, credential.secretKey),
    });
    const revokedSecretIds = options.keepOld ? [] : await deleteRootCredentialsExcept(trx, account.account_id, credential.secretId);
    return { accountId: account.account_id, name: account.name, rootCredential: credential, revokedSecretIds };
  });
}

/**
 * Keeps last_used_time within a minute of the truth with one write per credential per minute. A
 * failure of that bookkeeping must not fail the request: the next request within the minute
 * simply tries again.
 */
async function recordUse(db: Database, secretId: string, lastUsedTime: Date | null, cache: CredentialCache | undefined): Promise<void> {
  if (lastUsedTime && Date.now() - lastUsedTime.getTime() < LAST_USED_RESOLUTION_SECONDS * 1000) return;
  try {
    await touchCredentialLastUsed(db, secretId);
    // Written now, or by another instance within the minute (then the update matched no row):
    // either way the cached entry need not try again for a minute.
    cache?.noteUse(secretId, new Date());
  } catch {
    // Deliberately ignored (see above); a database that is really down fails the request elsewhere.
  }
}
