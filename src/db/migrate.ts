// Applies migrations/*.sql in name order, each in a transaction of its own. Kysely's Migrator takes
// a PostgreSQL advisory lock, so several instances starting at once apply each migration exactly once.
//
// A committed migration is never edited (a database that ran the old text would silently keep
// what the new text no longer does), so the SHA-256 of each applied file is recorded beside its
// name, in a `checksum` column this module adds to Kysely's own `kysely_migration` table, and a
// start on a database whose applied migration differs from today's file is refused, naming it.
// Migrations applied before checksums were recorded take the file's checksum at the next start:
// what they ran is unknown, which is why a repair is a new migration that works from any history.
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { type Migration, type MigrationResultSet, Migrator, sql } from 'kysely';
import type { Database } from './connect.js';

// src/db → ../../migrations, and likewise dist/db → ../../migrations in a build.
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

/** An applied migration whose file has changed since: the operator restores the file. */
export class MigrationChangedError extends Error {
  override name = 'MigrationChangedError';
  constructor(readonly migration: string) {
    super(
      `migration ${migration} was applied from a different file than migrations/${migration}.sql is now: ` +
        'a committed migration must never change; restore the file (git) and put the change in a new migration',
    );
  }
}

interface SqlMigration {
  name: string;
  text: string;
  checksum: string;
}

async function readSqlMigrations(directory: string): Promise<SqlMigration[]> {
  const files = (await readdir(directory)).filter((file) => file.endsWith('.sql')).sort();
  return Promise.all(
    files.map(async (file) => {
      const text = await readFile(directory + file, 'utf8');
      return { name: file.replace(/\.sql$/, ''), text, checksum: createHash('sha256').update(text).digest('hex') };
    }),
  );
}

/** Checksums recorded so far, by name; empty on a fresh database or one from before checksums. */
async function recordedChecksums(db: Database): Promise<Map<string, string>> {
  const column = await sql<{ present: boolean }>`
    SELECT EXISTS (SELECT 1 FROM information_schema.columns
                   WHERE table_schema = current_schema() AND table_name = 'kysely_migration' AND column_name = 'checksum') AS present`.execute(db);
  if (!column.rows[0]?.present) return new Map();
  const rows = await sql<{ name: string; checksum: string }>`SELECT name, checksum FROM kysely_migration WHERE checksum IS NOT NULL`.execute(db);
  return new Map(rows.rows.map((row) => [row.name, row.checksum]));
}

async function recordChecksums(db: Database, migrations: SqlMigration[]): Promise<void> {
  await sql`ALTER TABLE kysely_migration ADD COLUMN IF NOT EXISTS checksum text`.execute(db);
  // Only rows still without one: a checksum once recorded is what the database ran, never overwritten.
  await sql`
    UPDATE kysely_migration m SET checksum = f.checksum
    FROM jsonb_to_recordset(${JSON.stringify(migrations.map(({ name, checksum }) => ({ name, checksum })))}::jsonb) AS f(name text, checksum text)
    WHERE m.name = f.name AND m.checksum IS NULL`.execute(db);
}

/** `directory` is for tests that apply a migration folder of their own. */
export async function migrateToLatest(db: Database, directory = MIGRATIONS_DIR): Promise<string[]> {
  const migrations = await readSqlMigrations(directory);
  const recorded = await recordedChecksums(db);
  const changed = migrations.find((migration) => recorded.has(migration.name) && recorded.get(migration.name) !== migration.checksum);
  if (changed) throw new MigrationChangedError(changed.name);

  const provided: Record<string, Migration> = Object.fromEntries(
    migrations.map(({ name, text }) => [name, { up: async (target: Database) => void (await sql.raw(text).execute(target)) }]),
  );
  const migrator = new Migrator({ db, provider: { getMigrations: async () => provided } });
  // One migration per transaction (migrateUp), not all pending ones in one (migrateToLatest): on
  // Citus, DDL that a migration sends to the shards in parallel (0015's indexes) leaves the
  // transaction unable to change a distributed function after it ("cannot run function command
  // because there was a parallel operation on a distributed table in the transaction"), so a
  // database two releases behind could not be brought up to date (test/citus/distribute.test.ts).
  // Each step is still whole: the migration and its row in kysely_migration commit together.
  const applied: string[] = [];
  for (;;) {
    const result: MigrationResultSet = await migrator.migrateUp();
    if (result.error) throw result.error;
    const done = (result.results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    if (done.length === 0) break;
    applied.push(...done);
  }
  await recordChecksums(db, migrations);
  return applied;
}
