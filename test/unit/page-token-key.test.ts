import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { PAGE_TOKEN_KEY_FILE, readOrCreateKeyFile, resolvePageTokenKey } from '../../src/page-token-key.js';

let dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true })));
  dirs = [];
});
const tempDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), 'page-token-key-'));
  dirs.push(dir);
  return dir;
};
const silent = { warn: () => {} };

describe('the page-token key', () => {
  it('is generated into the data directory on the first start (mode 0600) and reused on later starts', async () => {
    const dataDir = join(await tempDir(), 'data'); // not created yet
    const first = await readOrCreateKeyFile(dataDir);
    expect(first.length).toBe(32);
    const file = join(dataDir, PAGE_TOKEN_KEY_FILE);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    expect(await readOrCreateKeyFile(dataDir)).toEqual(first);
    expect((await readFile(file, 'utf8')).trim()).toBe(first.toString('base64'));
  });

  it('refuses a key file that does not hold at least 32 bytes of base64, naming the file', async () => {
    const dataDir = await tempDir();
    await writeFile(join(dataDir, PAGE_TOKEN_KEY_FILE), 'c2hvcnQ=\n');
    await expect(readOrCreateKeyFile(dataDir)).rejects.toThrow(/page-token\.key: must hold the base64 encoding of at least 32 bytes/);
  });

  it('is PAGE_TOKEN_KEY when set, in either mode, and writes no file then', async () => {
    const dataDir = await tempDir();
    const key = Buffer.alloc(32, 3);
    expect(await resolvePageTokenKey(loadConfig({ DATA_DIR: dataDir, PAGE_TOKEN_KEY: key.toString('base64') }), silent)).toEqual(key);
    await expect(stat(join(dataDir, PAGE_TOKEN_KEY_FILE))).rejects.toThrow(/ENOENT/);
    expect(await resolvePageTokenKey(loadConfig({ DATABASE_URL: 'postgres://x/y', PAGE_TOKEN_KEY: key.toString('base64') }), silent)).toEqual(key);
  });

  it('with PostgreSQL and no PAGE_TOKEN_KEY, is a random key per process, with a warning', async () => {
    const warnings: string[] = [];
    const logger = { warn: (message: string) => void warnings.push(message) };
    const config = loadConfig({ DATABASE_URL: 'postgres://x/y' });
    const [a, b] = [await resolvePageTokenKey(config, logger), await resolvePageTokenKey(config, logger)];
    expect(a.length).toBe(32);
    expect(a).not.toEqual(b);
    expect(warnings).toHaveLength(2);
    expect(warnings[0]).toMatch(/PAGE_TOKEN_KEY is not set/);
  });
});
