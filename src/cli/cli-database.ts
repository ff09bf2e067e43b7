// What the operator commands share: the data folder's lock before an embedded database is opened,
// and the migrations; a database that cannot be reached is a StartupFailure of one line, as in the server.
import type { Config } from '../config.js';
import { type DatabaseHandle, openDatabase } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';
import { databaseTargets, describeDatabaseFailure } from '../db/unreachable-database.js';
import { lockDataDir } from '../lib/data-dir-lock.js';
import { StartupFailure } from '../startup-failure.js';

// The holder is usually a server; the account commands have no HTTP twin, but the other changes
// (spaces, sessions, sub-accounts and their credentials) go through a running server's API.
const ADVICE = 'stop it, then run this command again (while a server runs, use its HTTP API instead).';

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
    const target = databaseTargets(config.database)?.direct;
    const reason = target && describeDatabaseFailure(error, target);
    throw reason ? new StartupFailure(reason, { cause: error }) : error;
  }
}
