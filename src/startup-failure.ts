// How the server and the operator commands fail before they can do their work: one line on stderr
// that says what is wrong and what to change, then exit 1. The stack only helps a developer, so it
// follows the line only with LOG_LEVEL=debug (or trace). Database passwords never appear.
import { inspect } from 'node:util';
import { type Config, ConfigError } from './config.js';
import { MigrationChangedError } from './db/migrate.js';
import { withoutPasswords } from './db/unreachable-database.js';
import { DataDirInUseError } from './lib/data-dir-lock.js';

/** A failure the operator fixes outside the code (configuration, a busy port, the database): its message is the line. */
export class StartupFailure extends Error {
  override name = 'StartupFailure';
}

/** Prints the failure; `prefix` begins the line of an unforeseen error ("Failed to start"). */
export function reportStartupFailure(error: unknown, config: Config | undefined, prefix: string): void {
  const known = error instanceof StartupFailure || error instanceof ConfigError || error instanceof DataDirInUseError || error instanceof MigrationChangedError;
  const urls = config?.database.kind === 'postgres' ? [config.database.url, config.database.directUrl] : [];
  const message = error instanceof Error ? error.message : String(error);
  console.error(known ? message : `${prefix}: ${withoutPasswords(message.split('\n')[0]!, urls)}`);
  if (config?.logLevel === 'debug' || config?.logLevel === 'trace') console.error(withoutPasswords(inspect(error), urls));
}
