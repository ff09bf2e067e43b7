// Where CREDENTIAL_MASTER_KEY comes from when it is not set (server.ts and the admin command).
// The key encrypts the stored copy of each secret key, which TC3-HMAC-SHA256 signatures need
// (modules/tencent): without one, credentials work as bearer tokens only.
import type { FastifyBaseLogger } from 'fastify';
import type { Config } from './config.js';
import { readOrCreateSecretFile } from './page-token-key.js';

export const CREDENTIAL_MASTER_KEY_FILE = 'credential-master.key';

/**
 * CREDENTIAL_MASTER_KEY when set. Otherwise, embedded: a key generated into the data directory on
 * the first start (mode 0600) and read back later, as for the page-token key. PostgreSQL: none,
 * with a warning. Unlike a page-token key, a per-process key would be wrong: what it encrypts is
 * stored, and another instance (or the next start) could not read it.
 */
export async function resolveCredentialMasterKey(config: Config, logger: Pick<FastifyBaseLogger, 'warn'>): Promise<Buffer | undefined> {
  if (config.credentialMasterKey) return config.credentialMasterKey;
  if (config.database.kind === 'pglite') {
    return readOrCreateSecretFile(config.database.dataDir, CREDENTIAL_MASTER_KEY_FILE, {
      valid: (stored) => stored.length === 32,
      rule: 'exactly 32 bytes (it encrypts the stored secret keys: restore the original file rather than delete it)',
    });
  }
  logger.warn(
    'CREDENTIAL_MASTER_KEY is not set: secret keys are not stored encrypted, so the Tencent Cloud API 3.0 endpoint (TC3-HMAC-SHA256 signatures) refuses every request; bearer tokens work. Set CREDENTIAL_MASTER_KEY (openssl rand -base64 32) on every instance.',
  );
  return undefined;
}
