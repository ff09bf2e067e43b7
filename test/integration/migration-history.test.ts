// Migrations are frozen once committed (src/db/migrate.ts): the migrator records each applied
// file's checksum and refuses a database whose applied migration differs from today's file, and
// migration 0013 repairs the two migrations edited before that rule was enforced, so a database
// that ran either first version (kept in test/fixtures/migration-history/, taken from git) ends
// identical to a fresh one.
import { randomBytes } from 'node:crypto';
import { appendFile, copyFile, cp, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { type Database, type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { MigrationChangedError, migrateToLatest } from '../../src/db/migrate.js';
import { withDatabase } from '../support/backend.js';

const backend = inject('testBackend');
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));
const FIRST_VERSIONS_DIR = fileURLToPath(new URL('../fixtures/migration-history/', import.meta.url));
const FIRST_VERSIONS = {
  '0006_event_stream_and_replay': 'test/fixtures/migration-history/0006_event_stream_and_replay.first.sql',
  '0007_append_batches': 'test/fixtures/migration-history/0007_append_batches.first.sql',
} as const;
type Edited = keyof typeof FIRST_VERSIONS;

const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function adminQuery(text: string): Promise<void> {
  if (backend.kind !== 'postgres') throw new Error('PostgreSQL only');
  const client = new pg.Client({ connectionString: backend.adminUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** A fresh, empty database: a new one on PostgreSQL, a new in-memory PGlite otherwise. */
async function emptyDatabase(): Promise<DatabaseHandle> {
  let handle: DatabaseHandle;
  if (backend.kind === 'pglite') {
    handle = await openDatabase({ kind: 'pglite', dataDir: undefined, statementTimeoutMs: 60_000 });
  } else {
    const name = `ass_history_${randomBytes(6).toString('hex')}`;
    await adminQuery(`CREATE DATABASE "${name}"`);
    cleanups.push(() => adminQuery(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    handle = await openDatabase({ kind: 'postgres', url: withDatabase(backend.adminUrl, name), poolMax: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  }
  cleanups.push(() => handle.close());
  return handle;
}

/** A copy of migrations/ up to and including `upTo`, with the given migrations in their first version. */
async function historicalFolder(upTo: string, firstVersions: Edited[]): Promise<string> {
  const folder = `${await mkdtemp(join(tmpdir(), 'ass-migrations-'))}/`;
  cleanups.push(() => rm(folder, { recursive: true, force: true }));
  for (const file of (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql') && f <= `${upTo}.sql`)) {
    const name = file.replace(/\.sql$/, '') as Edited;
    await copyFile(firstVersions.includes(name) ? `${FIRST_VERSIONS_DIR}${name}.first.sql` : MIGRATIONS_DIR + file, folder + file);
  }
  return folder;
}

/**
 * Everything the migrations define, one line per catalog entry: functions (by their full
 * definition), triggers, columns, indexes and constraints of the schema. Equal lists mean equal schemas.
 */
async function catalog(db: Database): Promise<string[]> {
  const rows = await sql<{ entry: string }>`
    SELECT 'function ' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ') ' || md5(pg_get_functiondef(p.oid)) AS entry
      FROM pg_proc p WHERE p.pronamespace = current_schema()::regnamespace AND p.prokind IN ('f', 'p')
    UNION ALL
    SELECT 'trigger ' || pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
      WHERE c.relnamespace = current_schema()::regnamespace AND NOT t.tgisinternal
    UNION ALL
    SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || coalesce(column_default, '') || ' ' || is_nullable
      FROM information_schema.columns WHERE table_schema = current_schema()
    UNION ALL
    SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
    UNION ALL
    SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
      FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
    ORDER BY 1`.execute(db);
  return rows.rows.map((row) => row.entry);
}

const migrationRows = async (db: Database) =>
  (await sql<{ name: string; checksum: string | null }>`SELECT name, checksum FROM kysely_migration ORDER BY name`.execute(db)).rows;

describe('migration history', () => {
  let fresh: string[];

  it('a fresh database records a checksum for every migration it applied', async () => {
    const { db } = await emptyDatabase();
    const applied = await migrateToLatest(db);
    const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, ''));
    expect(applied).toEqual(files.sort());
    const rows = await migrationRows(db);
    expect(rows.map((row) => row.name)).toEqual(applied);
    for (const row of rows) expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
    fresh = await catalog(db);
    // The trigger 0013 repairs is not part of a fresh schema.
    expect(fresh.some((entry) => entry.includes('events_appended'))).toBe(false);
  });

  describe.each([
    { label: "0006's first version", firstVersions: ['0006_event_stream_and_replay'] as Edited[] },
    { label: "0007's first version", firstVersions: ['0007_append_batches'] as Edited[] },
    { label: 'the first versions of both', firstVersions: ['0006_event_stream_and_replay', '0007_append_batches'] as Edited[] },
  ])('a database that ran $label before checksums existed', ({ firstVersions }) => {
    it('migrates to a schema identical to a fresh one', async () => {
      const { db } = await emptyDatabase();
      await migrateToLatest(db, await historicalFolder('0007_append_batches', firstVersions));
      const before = await catalog(db);
      if (firstVersions.includes('0006_event_stream_and_replay')) {
        expect(before.some((entry) => entry.startsWith('trigger CREATE TRIGGER events_appended'))).toBe(true);
      }
      if (firstVersions.includes('0007_append_batches')) {
        expect(before.some((entry) => entry.startsWith('function append_events_batch(p_appends jsonb, p_state_limit integer, OUT ordinal integer, OUT appended boolean'))).toBe(true);
      }
      // As the migrator before checksums left it: names only.
      await sql`ALTER TABLE kysely_migration DROP COLUMN checksum`.execute(db);

      const applied = await migrateToLatest(db);
      expect(applied[0]).toBe('0008_append_batch_lock_wait');
      expect(applied).toContain('0013_repair_edited_migrations');
      expect(await catalog(db)).toEqual(fresh);
      // Every migration now carries today's checksum, so the next edit of 0006 or 0007 is refused.
      for (const row of await migrationRows(db)) expect(row.checksum).toMatch(/^[0-9a-f]{64}$/);
    });
  });

  it('refuses to start on a database whose applied migration differs from the file, naming it, and applies nothing', async () => {
    const { db } = await emptyDatabase();
    const folder = await historicalFolder('0005_credential_notify', []);
    await migrateToLatest(db, folder);
    const recorded = await migrationRows(db);
    const schema = await catalog(db);

    // An edit of a committed migration, and a new migration that must not run after it.
    await appendFile(`${folder}0003_read_indexes.sql`, '\n-- an edit after it was applied\n');
    await cp(`${MIGRATIONS_DIR}0006_event_stream_and_replay.sql`, `${folder}0006_event_stream_and_replay.sql`);
    const refusal = await migrateToLatest(db, folder).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(MigrationChangedError);
    expect((refusal as MigrationChangedError).migration).toBe('0003_read_indexes');
    expect((refusal as Error).message).toContain('migration 0003_read_indexes was applied from a different file');

    expect(await migrationRows(db)).toEqual(recorded);
    expect(await catalog(db)).toEqual(schema);
  });

  it("keeps first versions that differ from today's files (else the history tests show nothing)", async () => {
    for (const [name, path] of Object.entries(FIRST_VERSIONS)) {
      const first = await readFile(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8');
      const today = await readFile(`${MIGRATIONS_DIR}${name}.sql`, 'utf8');
      expect(first).not.toEqual(today);
    }
  });
});
