// Operator commands, run against the configured database (DATABASE_URL, or PGlite in DATA_DIR):
//   npm run admin -- create-account --name X            prints the new root credential once
//   npm run admin -- list-accounts                      one JSON line per account; never a secret
//   npm run admin -- rotate-root-credential --name X [--keep-old]
// Exit codes: 0 done, 1 refused (the account exists / does not exist, the data folder is in use by a
// server, the database cannot be reached: one line says which), 2 usage error.
import { resolveCredentialMasterKey } from '../credential-master-key.js';
import { parseArgs } from 'node:util';
import { type Config, loadConfig } from '../config.js';
import type { Database } from '../db/connect.js';
import { reportStartupFailure } from '../startup-failure.js';
import { openMigratedDatabase } from './cli-database.js';
import {
  AccountExistsError,
  AccountNotFoundError,
  createAccount,
  listAccounts,
  rotateRootCredential,
} from '../modules/accounts/index.js';

const USAGE = [
  'usage: npm run admin -- <command>',
  '  create-account --name <account name>                 create an account; prints its root credential once',
  '  list-accounts                                        one JSON line per account (no secrets)',
  '  rotate-root-credential --name <account name> [--keep-old]',
  '                                                       issue a new root credential (printed once) and',
  '                                                       delete the previous ones unless --keep-old',
].join('\n');

class UsageError extends Error {}

type Command = (db: Database, masterKey: Buffer | undefined) => Promise<number>;

const SECRET_NOTICE = 'The secretKey is shown this once; store it now.';

/** Validates the arguments before any database is opened, so a typo never touches data. */
function parseCommand(argv: string[]): Command {
  const [command, ...rest] = argv;
  switch (command) {
    case 'create-account': {
      const { name } = parseOptions(rest, { name: { type: 'string' } });
      const accountName = requireName(name);
      return async (db, masterKey) => {
        const account = await createAccount(db, accountName, { masterKey });
        console.log(JSON.stringify({ accountId: account.accountId, name: account.name, defaultSpaceId: account.defaultSpaceId, ...account.rootCredential }, null, 2));
        console.error(SECRET_NOTICE);
        return 0;
      };
    }
    case 'list-accounts': {
      parseOptions(rest, {});
      return async (db) => {
        for (const account of await listAccounts(db)) console.log(JSON.stringify(account));
        return 0;
      };
    }
    case 'rotate-root-credential': {
      const { name, 'keep-old': keepOld } = parseOptions(rest, { name: { type: 'string' }, 'keep-old': { type: 'boolean' } });
      const accountName = requireName(name);
      return async (db, masterKey) => {
        const rotated = await rotateRootCredential(db, accountName, { keepOld: keepOld === true, masterKey });
        console.log(JSON.stringify({ accountId: rotated.accountId, name: rotated.name, ...rotated.rootCredential, revokedSecretIds: rotated.revokedSecretIds }, null, 2));
        console.error(
          `${SECRET_NOTICE} ${keepOld ? 'The previous root credentials still work.' : `${rotated.revokedSecretIds.length} previous root credential(s) deleted.`}`,
        );
        return 0;
      };
    }
    default:
      throw new UsageError(command ? `unknown command "${command}"` : 'a command is required');
  }
}

function parseOptions<T extends Record<string, { type: 'string' | 'boolean' }>>(args: string[], options: T) {
  try {
    return parseArgs({ args, options, strict: true, allowPositionals: false }).values as { [K in keyof T]?: T[K]['type'] extends 'string' ? string : boolean };
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
}

function requireName(name: string | undefined): string {
  const trimmed = name?.trim();
  if (!trimmed || trimmed.length > 128) throw new UsageError('--name is required (1–128 characters)');
  return trimmed;
}

async function main(argv: string[]): Promise<number> {
  let command: Command;
  try {
    command = parseCommand(argv);
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    console.error(`${error.message}\n${USAGE}`);
    return 2;
  }
  const config = loadConfig(process.env);
  loadedConfig = config;
  const { database, close } = await openMigratedDatabase(config, 'admin command');
  try {
    // The embedded data directory's key file, when there is no CREDENTIAL_MASTER_KEY (as the server does).
    const masterKey = await resolveCredentialMasterKey(config, { warn: () => {} });
    return await command(database.db, masterKey);
  } catch (error) {
    if (error instanceof AccountExistsError || error instanceof AccountNotFoundError) {
      console.error(error.message);
      return 1;
    }
    throw error;
  } finally {
    await close();
  }
}

// Read by the failure report: it prints a stack only at debug level.
let loadedConfig: Config | undefined;

process.exitCode = await main(process.argv.slice(2)).catch((error: unknown) => {
  reportStartupFailure(error, loadedConfig, 'Failed');
  return 1;
});
