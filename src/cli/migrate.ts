// `npm run migrate`: applies pending migrations to the configured database and exits.
import { loadConfig } from '../config.js';
import { openDatabase } from '../db/connect.js';
import { migrateToLatest } from '../db/migrate.js';

const config = loadConfig(process.env);
const database = await openDatabase(config.database);
try {
  const applied = await database.onDirectConnection(migrateToLatest);
  console.log(applied.length ? `applied: ${applied.join(', ')}` : 'already up to date');
} finally {
  await database.close();
}
