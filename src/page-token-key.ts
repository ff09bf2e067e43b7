// Where the page-token signing key comes from when PAGE_TOKEN_KEY is not set (server.ts only).
import { randomBytes } from 'node:crypto';
import { mkdir, open, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FastifyBaseLogger } from 'fastify';
import { type Config, ConfigError } from './config.js';
import { MIN_PAGE_TOKEN_KEY_BYTES } from './lib/page-token.js';

export const PAGE_TOKEN_KEY_FILE = 'page-token.key';

/**
 * PAGE_TOKEN_KEY when set. Otherwise, embedded: a key generated into the data directory on the
 * first start (mode 0600) and read back on later ones, so tokens survive restarts. PostgreSQL: a
 * random key for this process, with a warning, since several instances (or a restart) would each
 * refuse the others' tokens; starting is still better than refusing to, and a refused token is
 * only a 400 the client recovers from by listing again from the first page.
 */
export async function resolvePageTokenKey(config: Config, logger: Pick<FastifyBaseLogger, 'warn'>): Promise<Buffer> {
  if (config.pageTokenKey) return config.pageTokenKey;
  if (config.database.kind === 'pglite') return readOrCreateKeyFile(config.database.dataDir);
  logger.warn(
    'PAGE_TOKEN_KEY is not set: page tokens are signed with a key generated for this process; they stop working after a restart and are refused by other instances. Set PAGE_TOKEN_KEY (openssl rand -base64 32) on every instance.',
  );
  return randomBytes(32);
}

export async function readOrCreateKeyFile(dataDir: string): Promise<Buffer> {
  return readOrCreateSecretFile(dataDir, PAGE_TOKEN_KEY_FILE, {
    valid: (stored) => stored.length >= MIN_PAGE_TOKEN_KEY_BYTES,
    rule: `at least ${MIN_PAGE_TOKEN_KEY_BYTES} bytes (delete it to generate a new page-token key)`,
  });
}

/**
 * A 32-byte key kept in `dataDir/fileName` as base64 (mode 0600): generated on the first call,
 * read back on later ones. `rule` completes "must hold the base64 encoding of …" when the stored
 * file is not `valid`.
 */
export async function readOrCreateSecretFile(dataDir: string, fileName: string, check: { valid: (stored: Buffer) => boolean; rule: string }): Promise<Buffer> {
  const path = join(dataDir, fileName);
  await mkdir(dataDir, { recursive: true });
  const key = randomBytes(32);
  try {
    // 'wx': never overwrites a key another start wrote first.
    const file = await open(path, 'wx', 0o600);
    try {
      await file.writeFile(`${key.toString('base64')}\n`);
      await file.sync();
    } finally {
      await file.close();
    }
    return key;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const text = (await readFile(path, 'utf8')).trim();
  const stored = Buffer.from(text, 'base64');
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(text) || !check.valid(stored)) {
    throw new ConfigError(`${path}: must hold the base64 encoding of ${check.rule}`);
  }
  return stored;
}
