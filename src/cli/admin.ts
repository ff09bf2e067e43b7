// Operator commands: `npm run admin -- create-account --name X` prints the new root credential once.
import { parseArgs } from 'node:util';
import { loadConfig } from '../config.js';
import { openDatabase } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { AccountExistsError, createAccount } from '../modules/accounts/accounts.service.js';

const USAGE = 'usage: npm run admin -- create-account --name <account name>';

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command !== 'create-account') {
    console.error(USAGE);
    return 2;
  }
  const { values } = parseArgs({ args: rest, options: { name: { type: 'string' } }, strict: true });
  const name = values.name?.trim();
  if (!name || name.length > 128) {
    console.error(`--name is required (1–128 characters)\n${USAGE}`);
    return 2;
  }
  const database = await openDatabase(loadConfig(process.env).database);
  try {
    await migrateToLatest(database.db);
    const account = await createAccount(database.db, name);
    console.log(JSON.stringify({ accountId: account.accountId, name: account.name, defaultSpaceId: account.defaultSpaceId, ...account.rootCredential }, null, 2));
    console.error('The secretKey is shown this once; store it now.');
    return 0;
  } catch (error) {
    if (error instanceof AccountExistsError) {
      console.error(error.message);
      return 1;
    }
    throw error;
  } finally {
    await database.close();
  }
}

process.exitCode = await main(process.argv.slice(2));
