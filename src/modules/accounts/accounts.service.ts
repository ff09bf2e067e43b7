// Accounts are created by an operator command (or by the embedded mode on first start), never over
// the API. Each account gets its root principal, its default space and one root credential.
import { AppError } from '../../errors.js';
import type { Database } from '../../db/connect.js';
import { newAccountId, newSpaceId } from '../../lib/ids.js';
import {
  ROOT_PRINCIPAL_ID,
  findAccountByName,
  findCredential,
  insertAccountIfAbsent,
  insertDefaultSpace,
  insertRootPrincipal,
  upsertCredential,
} from './accounts.repository.js';
import { type IssuedCredential, hashSecretKey, issueCredential, parseToken, secretKeyMatches } from './credentials.js';
import type { Principal } from './principal.js';

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

/**
 * Creates an account with its root principal, default space and a root credential. `pinnedToken`
 * (a `<secretId>.<secretKey>` chosen by the operator, e.g. ROOT_API_KEY) replaces the generated one.
 */
export async function createAccount(db: Database, name: string, pinnedToken?: string): Promise<CreatedAccount> {
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
    });
  });
  return { accountId, name, defaultSpaceId, rootCredential: credential };
}

/**
 * Embedded mode: makes sure the `default` account exists. Answers the new account (whose root
 * credential is shown once) only when this call created it. A pinned ROOT_API_KEY is (re)installed
 * on every start so that development and compose setups can rely on it.
 */
export async function ensureEmbeddedAccount(db: Database, pinnedToken?: string): Promise<CreatedAccount | undefined> {
  const existing = await findAccountByName(db, EMBEDDED_ACCOUNT_NAME);
  if (!existing) {
    try {
      return await createAccount(db, EMBEDDED_ACCOUNT_NAME, pinnedToken);
    } catch (error) {
      if (!(error instanceof AccountExistsError)) throw error; // another instance won the race
      return undefined;
    }
  }
  if (pinnedToken) {
    const { secretId, secretKey } = pinnedCredential(pinnedToken);
    await upsertCredential(db, { accountId: existing.account_id, principalId: ROOT_PRINCIPAL_ID, secretId, secretHash: hashSecretKey(secretKey) });
  }
  return undefined;
}

function pinnedCredential(token: string): IssuedCredential {
  const parsed = parseToken(token);
  if (!parsed) throw new Error('the pinned root key must be <secretId>.<secretKey> (AKID + 32 base62 characters, ".", ≥43 base64url characters)');
  return { ...parsed, token };
}

const BEARER = /^Bearer ([^\s]+)$/i;

/** Resolves `Authorization: Bearer <secretId>.<secretKey>` to a principal, or fails with AuthFailure. */
export async function authenticate(db: Database, authorization: string | undefined): Promise<Principal> {
  if (!authorization) throw new AppError('AuthFailure', 'Missing Authorization header: send "Authorization: Bearer <secretId>.<secretKey>".');
  const token = BEARER.exec(authorization)?.[1];
  const parsed = token ? parseToken(token) : undefined;
  if (!parsed) throw new AppError('AuthFailure', 'Malformed credential: expected "Authorization: Bearer <secretId>.<secretKey>".');
  const credential = await findCredential(db, parsed.secretId);
  // One message for unknown, disabled and wrong keys: the answer must not tell which ids exist.
  if (!credential || credential.status !== 'enabled' || !secretKeyMatches(credential.secret_hash, parsed.secretKey)) {
    throw new AppError('AuthFailure', 'The credential is unknown, disabled or wrong.');
  }
  return {
    accountId: credential.account_id,
    principalId: credential.principal_id,
    kind: credential.kind,
    secretId: credential.secret_id,
    statements: credential.kind === 'root' ? [] : (credential.statements ?? []),
  };
}
