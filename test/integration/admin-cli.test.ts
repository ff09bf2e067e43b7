// The operator command (`npm run admin -- …`) as a real process against a real database: a fresh
// PostgreSQL database cloned from the template, or a copy of the migrated PGlite data directory (so
// the first command does not pay for initdb). The database is opened by the test only while no
// command runs (PGlite is a single-process database).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { cp, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type Database } from '../../src/db/connect.js';
import { authenticate } from '../../src/modules/accounts/accounts.service.js';
import { AppError } from '../../src/errors.js';
import { decryptSecret } from '../../src/modules/accounts/secret-box.js';
import { cloneMigratedDatabase } from '../support/test-database.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TIMEOUT_MS = 60_000;

interface CliDatabase {
  env: Record<string, string>;
  /** Runs `fn` on the database while no command holds it. */
  use<T>(fn: (db: Database) => Promise<T>): Promise<T>;
  dispose(): Promise<void>;
}

async function cliDatabase(): Promise<CliDatabase> {
  const backend = inject('testBackend');
  if (backend.kind === 'pglite') {
    const dataDir = await mkdtemp(join(tmpdir(), 'ass-admin-cli-'));
    await cp(backend.dataDir, dataDir, { recursive: true });
    return {
      env: { DATA_DIR: dataDir },
      async use(fn) {
        const handle = await openDatabase({ kind: 'pglite', dataDir, statementTimeoutMs: 60_000 });
        try {
          return await fn(handle.db);
        } finally {
          await handle.close();
        }
      },
      dispose: () => rm(dataDir, { recursive: true, force: true }),
    };
  }
  const clone = await cloneMigratedDatabase('ass_admin');
  return {
    env: { DATABASE_URL: clone.url },
    async use(fn) {
      const handle = await openDatabase({ kind: 'postgres', url: clone.url, poolMax: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
      try {
        return await fn(handle.db);
      } finally {
        await handle.close();
      }
    },
    dispose: () => clone.drop(),
  };
}

interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** `node --import tsx src/cli/admin.ts …`: what `npm run admin -- …` runs. */
function runAdmin(args: string[], env: Record<string, string>): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/admin.ts', ...args],
      // A clean environment: only what the command needs, so no DATABASE_URL leaks in from the shell.
      { cwd: ROOT, env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ...env }, timeout: TIMEOUT_MS },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : -1) : 0, stdout, stderr }),
    );
  });
}

interface PrintedCredential {
  accountId: string;
  name: string;
  secretId: string;
  secretKey: string;
  token: string;
  revokedSecretIds?: string[];
}

/** True when the token authenticates; false only for the refusal of a revoked or unknown credential, any other error is thrown. */
async function authenticates(db: Database, token: string): Promise<boolean> {
  try {
    await authenticate(db, `Bearer ${token}`);
    return true;
  } catch (error) {
    if (error instanceof AppError && error.code === 'AuthFailure' && error.message === 'The credential is unknown, disabled or wrong.') return false;
    throw error;
  }
}

// One database for the file (a PGlite start costs seconds); each test uses accounts of its own.
let database: CliDatabase;
beforeAll(async () => {
  database = await cliDatabase();
}, TIMEOUT_MS);
afterAll(async () => database?.dispose());

async function createAccountWithCli(database: CliDatabase, name: string): Promise<PrintedCredential & { defaultSpaceId: string }> {
  const created = await runAdmin(['create-account', '--name', name], database.env);
  expect(created.code, created.stderr).toBe(0);
  return JSON.parse(created.stdout);
}

describe('npm run admin', () => {
  it('create-account prints a working root credential once, and refuses a taken name', { timeout: TIMEOUT_MS * 3 }, async () => {
    const account = await createAccountWithCli(database, 'created');
    expect(account).toMatchObject({ name: 'created', accountId: expect.stringMatching(/^acct-/), defaultSpaceId: expect.stringMatching(/^space-/) });
    expect(account.token).toBe(`${account.secretId}.${account.secretKey}`);

    const again = await runAdmin(['create-account', '--name', 'created'], database.env);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('already exists');
    await database.use(async (db) => {
      expect(await authenticates(db, account.token)).toBe(true);
      expect(await db.selectFrom('accounts').select('account_id').where('name', '=', 'created').execute()).toEqual([{ account_id: account.accountId }]);
    });
  });

  it('list-accounts prints one JSON line per account with its credential count and no secret', { timeout: TIMEOUT_MS * 4 }, async () => {
    const acme = await createAccountWithCli(database, 'listed-acme');
    const globex = await createAccountWithCli(database, 'listed-globex');
    const listed = await runAdmin(['list-accounts'], database.env);
    expect(listed.code, listed.stderr).toBe(0);
    const lines = listed.stdout.trim().split('\n').map((line) => JSON.parse(line));
    for (const line of lines) expect(Object.keys(line).sort()).toEqual(['accountId', 'createTime', 'credentialCount', 'name']);
    expect(lines.filter((line) => line.name.startsWith('listed-'))).toEqual([
      { accountId: acme.accountId, name: 'listed-acme', createTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT.*Z$/), credentialCount: 1 },
      { accountId: globex.accountId, name: 'listed-globex', createTime: expect.any(String), credentialCount: 1 },
    ]);
    for (const secret of [acme.secretKey, globex.secretKey, acme.secretId, globex.secretId]) {
      expect(listed.stdout).not.toContain(secret);
      expect(listed.stderr).not.toContain(secret);
    }
  });

  it('rotate-root-credential issues a new credential and deletes the previous one in the same step', { timeout: TIMEOUT_MS * 3 }, async () => {
    const account = await createAccountWithCli(database, 'rotated');
    const masterKey = randomBytes(32);
    const rotated = await runAdmin(['rotate-root-credential', '--name', 'rotated'], { ...database.env, CREDENTIAL_MASTER_KEY: masterKey.toString('base64') });
    expect(rotated.code, rotated.stderr).toBe(0);
    const printed: PrintedCredential = JSON.parse(rotated.stdout);
    expect(printed).toMatchObject({ accountId: account.accountId, name: 'rotated', revokedSecretIds: [account.secretId] });
    expect(printed.token).toBe(`${printed.secretId}.${printed.secretKey}`);
    expect(printed.secretId).not.toBe(account.secretId);
    expect(rotated.stderr).not.toContain(printed.secretKey);

    await database.use(async (db) => {
      expect(await authenticates(db, printed.token)).toBe(true);
      expect(await authenticates(db, account.token)).toBe(false);
      const credentials = await db
        .selectFrom('credentials')
        .select(['secret_id', 'principal_id', 'secret_encrypted'])
        .where('account_id', '=', account.accountId)
        .execute();
      expect(credentials.map((c) => [c.secret_id, c.principal_id])).toEqual([[printed.secretId, 'root']]);
      // With CREDENTIAL_MASTER_KEY set, the new secret is also kept encrypted under it.
      expect(decryptSecret(masterKey, credentials[0]!.secret_encrypted!)).toBe(printed.secretKey);
    });
  });

  it('rotate-root-credential --keep-old leaves the previous credential working', { timeout: TIMEOUT_MS * 3 }, async () => {
    const account = await createAccountWithCli(database, 'kept');
    const other = await createAccountWithCli(database, 'kept-neighbour');
    const rotated = await runAdmin(['rotate-root-credential', '--name', 'kept', '--keep-old'], database.env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const printed: PrintedCredential = JSON.parse(rotated.stdout);
    expect(printed.revokedSecretIds).toEqual([]);
    await database.use(async (db) => {
      expect(await authenticates(db, printed.token)).toBe(true);
      expect(await authenticates(db, account.token)).toBe(true);
      // Another account's root credential is never touched.
      expect(await authenticates(db, other.token)).toBe(true);
      const acme = await db.selectFrom('credentials').select(['secret_id', 'secret_encrypted']).where('account_id', '=', account.accountId).execute();
      expect(acme.map((c) => c.secret_id).sort()).toEqual([account.secretId, printed.secretId].sort());
      // No CREDENTIAL_MASTER_KEY: on PostgreSQL no encrypted copy; the embedded mode uses the key
      // file of its data directory (created on first use), as the server does.
      const embedded = inject('testBackend').kind === 'pglite';
      expect(acme.map((c) => c.secret_encrypted !== null)).toEqual([embedded, embedded]);
    });
  });

  it('rotate-root-credential of an unknown account exits 1 and changes nothing', { timeout: TIMEOUT_MS * 3 }, async () => {
    const account = await createAccountWithCli(database, 'unrotated');
    const res = await runAdmin(['rotate-root-credential', '--name', 'nobody'], database.env);
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('no account named "nobody"');
    expect(res.stdout).toBe('');
    await database.use(async (db) => {
      expect(await authenticates(db, account.token)).toBe(true);
      expect(await db.selectFrom('credentials').select('secret_id').where('account_id', '=', account.accountId).execute()).toEqual([
        { secret_id: account.secretId },
      ]);
    });
  });

  // Each case has a data directory of its own and never opens a database: they run side by side.
  it.concurrent.for<[why: string, args: string[]]>([
    ['no command', []],
    ['an unknown command', ['delete-everything']],
    ['create-account without --name', ['create-account']],
    ['create-account with a blank name', ['create-account', '--name', '  ']],
    ['rotate-root-credential without --name', ['rotate-root-credential', '--keep-old']],
    ['an unknown option', ['rotate-root-credential', '--name', 'acme', '--force']],
    ['list-accounts with an option', ['list-accounts', '--all']],
    ['a stray positional argument', ['list-accounts', 'acme']],
  ])('exits 2 with the usage on %s, before touching the database', { timeout: TIMEOUT_MS }, async ([, args], { expect }) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'ass-admin-usage-'));
    try {
      // An unreachable DATABASE_URL as well: a usage error must not even try to connect.
      const res = await runAdmin(args, { DATA_DIR: dataDir, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' });
      expect(res.code).toBe(2);
      expect(res.stderr).toContain('usage: npm run admin');
      expect(res.stdout).toBe('');
      expect(await readdir(dataDir)).toEqual([]);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
