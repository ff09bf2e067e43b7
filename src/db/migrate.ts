// Applies migrations/*.sql in name order. Kysely's Migrator takes a PostgreSQL advisory lock, so
// several instances starting at once apply each migration exactly once.
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Migration, type MigrationResultSet, Migrator, sql } from 'kysely';
import type { Database } from './connect.js';

// src/db → ../../migrations, and likewise dist/db → ../../migrations in a build.
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

async function readSqlMigrations(): Promise<Record<string, Migration>> {
  const files = (await readdir(MIGRATIONS_DIR)).filter((file) => file.endsWith('.sql')).sort();
  const migrations: Record<string, Migration> = {};
  for (const file of files) {
    const text = await readFile(MIGRATIONS_DIR + file, 'utf8');
    migrations[file.replace(/\.sql$/, '')] = { up: async (db) => void (await sql.raw(text).execute(db)) };
  }
  return migrations;
}

export async function migrateToLatest(db: Database): Promise<string[]> {
  const migrations = await readSqlMigrations();
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const result: MigrationResultSet = await migrator.migrateToLatest();
  if (result.error) throw result.error;
  return (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
