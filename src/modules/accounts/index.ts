// The accounts module's public entry: credentials as other modules see them (never a repository
// row), issuing one, and the lookups of the signature-based authentication.
export { lookUpCredential, principalOf, recordCredentialUse, storeNewCredential } from './accounts.service.js';
export type { CredentialCache } from './credential-cache.js';
export { LISTED_CREDENTIAL_COLUMNS, type ListedCredential, ROOT_PRINCIPAL_ID } from './credential.model.js';
export { isSecretId } from './credentials.js';
export { decryptSecret } from './secret-box.js';
