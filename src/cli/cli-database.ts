// What the operator commands share: the data folder's lock before an embedded database is opened,
// and the migrations; a database that cannot be reached is a StartupFailure of one line, as in the server.
import type { Config } from '../config.js';
import { type DatabaseHandle, openDatabase } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { type DatabaseTarget, describeDatabaseFailure } from '../db/unreachable-database.js';
import { lockDataDir } from '../lib/data-dir-lock.js';
import { StartupFailure } from '../startup-failure.js';

// A running server holds the folder; the admin commands have no HTTP twin for accounts, but the
// other changes (spaces, sessions, credentials of an account) go through the server's API.
const ADVICE = 'stop that server, then run this command again (while it runs, use its HTTP API instead).';

/**
 * Opens the configured database for a command and migrates it: on the embedded backend only after
 * taking the data folder's lock, so a command on a folder a server uses is refused having done nothing.
 */
export async function openMigratedDatabase(config: Config, command: string): Promise<{ database: DatabaseHandle; applied: string[]; close(): Promise<void> }> {
  const lock = config.database.kind === 'pglite' ? await lockDataDir(config.database.dataDir, command, ADVICE) : undefined;
  const database = await openDatabase(config.database);
  const close = async () => {
    await database.close();
    await lock?.release();
  };
  try {
    const applied = await database.onDirectConnection(migrateToLatest);
    return { database, applied, close };
  } catch (error) {
    await close().catch(() => {});
    const target = migrationTarget(config);
    const reason = target && describeDatabaseFailure(error, target);
    throw reason ? new StartupFailure(reason, { cause: error }) : error;
  }
}

function migrationTarget(config: Config): DatabaseTarget | undefined {
  if (config.database.kind !== 'postgres') return undefined;
  return config.database.directUrl
    ? { variable: 'DATABASE_DIRECT_URL', url: config.database.directUrl }
    : { variable: 'DATABASE_URL', url: config.database.url };
}
