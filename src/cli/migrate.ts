// `npm run migrate`: applies pending migrations to the configured database and exits.
import { type Config, loadConfig } from '../config.js';
import { reportStartupFailure } from '../startup-failure.js';
import { openMigratedDatabase } from './cli-database.js';

let config: Config | undefined;
try {
  config = loadConfig(process.env);
  const { applied, close } = await openMigratedDatabase(config, 'migrate');
  await close();
  console.log(applied.length ? `applied: ${applied.join(', ')}` : 'already up to date');
} catch (error) {
  reportStartupFailure(error, config, 'Failed to migrate');
  process.exitCode = 1;
}
