// Where the credential master key comes from: CREDENTIAL_MASTER_KEY, or (embedded) a key file
// generated into the data directory on the first start; none with PostgreSQL.
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { CREDENTIAL_MASTER_KEY_FILE, resolveCredentialMasterKey } from '../../src/credential-master-key.js';

let dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  dirs = [];
});
const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'credential-master-key-'));
  dirs.push(dir);
  return dir;
};
const silent = { warn: () => {} };

describe('the credential master key', () => {
  it('embedded: is generated into the data directory on the first start (mode 0600) and reused later', async () => {
    const dataDir = join(await tempDir(), 'data');
    const first = await resolveCredentialMasterKey(loadConfig({ DATA_DIR: dataDir }), silent);
    expect(first).toHaveLength(32);
    const file = join(dataDir, CREDENTIAL_MASTER_KEY_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await resolveCredentialMasterKey(loadConfig({ DATA_DIR: dataDir }), silent)).toEqual(first);
    expect((await readFile(file, 'utf8')).trim()).toBe(first!.toString('base64'));
  });

  it('refuses a key file that is not 32 bytes of base64, naming the file, rather than replace it', async () => {
    const dataDir = await tempDir();
    await writeFile(join(dataDir, CREDENTIAL_MASTER_KEY_FILE), `${Buffer.alloc(48).toString('base64')}\n`);
    await expect(resolveCredentialMasterKey(loadConfig({ DATA_DIR: dataDir }), silent)).rejects.toThrow(/credential-master\.key: must hold the base64 encoding of exactly 32 bytes/);
  });

  it('is CREDENTIAL_MASTER_KEY when set, in either mode, and writes no file then', async () => {
    const dataDir = await tempDir();
    const key = Buffer.alloc(32, 5);
    expect(await resolveCredentialMasterKey(loadConfig({ DATA_DIR: dataDir, CREDENTIAL_MASTER_KEY: key.toString('base64') }), silent)).toEqual(key);
    await expect(stat(join(dataDir, CREDENTIAL_MASTER_KEY_FILE))).rejects.toThrow(/ENOENT/);
    expect(await resolveCredentialMasterKey(loadConfig({ DATABASE_URL: 'postgres://x/y', CREDENTIAL_MASTER_KEY: key.toString('base64') }), silent)).toEqual(key);
  });

  it('with PostgreSQL and none set, is absent, with a warning naming the variable', async () => {
    const warnings: string[] = [];
    expect(await resolveCredentialMasterKey(loadConfig({ DATABASE_URL: 'postgres://x/y' }), { warn: (message: string) => void warnings.push(message) })).toBeUndefined();
    expect(warnings).toEqual([expect.stringMatching(/CREDENTIAL_MASTER_KEY is not set/)]);
  });
});
