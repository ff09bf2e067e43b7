// The accounts module's public entry: credentials as other modules see them (never a repository
// row), issuing one, and the lookups of the signature-based authentication.
export { inIamWriteTransaction, lookUpCredential, principalOf, recordCredentialUse, storeNewCredential } from './accounts.service.js';
export type { CredentialCache } from './credential-cache.js';
export { LISTED_CREDENTIAL_COLUMNS, type ListedCredential, ROOT_PRINCIPAL_ID } from './credential.model.js';
export { isSecretId } from './credentials.js';
export { decryptSecret } from './secret-box.js';
// For the wiring (src/app.ts, src/server.ts, the admin CLI).
export {
  AccountExistsError,
  AccountNotFoundError,
  authenticate,
  createAccount,
  ensureEmbeddedAccount,
  listAccounts,
  rotateRootCredential,
} from './accounts.service.js';
export { type ListeningCredentialCache, startCredentialCache } from './credential-cache-listener.js';
