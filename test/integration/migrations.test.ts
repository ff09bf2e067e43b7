// Migrations run at start-up under a lock: several instances starting together against one fresh
// database must apply each migration exactly once, and a later start applies nothing.
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { withDatabase } from '../support/backend.js';

const backend = inject('testBackend');
const MIGRATIONS = (await readdir(new URL('../../migrations/', import.meta.url))).filter((f) => f.endsWith('.sql')).map((f) => f.replace(/\.sql$/, '')).sort();

/** Two handles on one fresh, empty database (two pools on PostgreSQL; one PGlite instance). */
let handles: DatabaseHandle[] = [];
let dropDatabase: (() => Promise<void>) | undefined;

async function adminQuery(adminUrl: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

beforeAll(async () => {
  if (backend.kind === 'pglite') {
    // PGlite is a single database session: one instance is all a process can have on a data dir.
    handles = [await openDatabase({ kind: 'pglite', dataDir: undefined, statementTimeoutMs: 60_000 })];
    return;
  }
  const name = `ass_migrate_${randomBytes(6).toString('hex')}`;
  await adminQuery(backend.adminUrl, `CREATE DATABASE "${name}"`);
  dropDatabase = () => adminQuery(backend.adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  const url = withDatabase(backend.adminUrl, name);
  const open = () => openDatabase({ kind: 'postgres', url, poolMax: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  handles = [await open(), await open()];
});

afterAll(async () => {
  for (const handle of handles) await handle.close();
  await dropDatabase?.();
});

describe('migrations', () => {
  // On PGlite there is one database session, so the two "instances" are one handle and nothing
  // races: the title says which case ran.
  const raceTitle =
    backend.kind === 'postgres'
      ? 'apply once when two instances migrate a fresh database at the same time (PostgreSQL: two pools race for the lock)'
      : 'apply once on a fresh database, called twice at once on its one session (PGlite: no race, one after the other)';
  it(raceTitle, async () => {
    const [first, second = first] = handles as [DatabaseHandle, DatabaseHandle?];
    const results = await Promise.all([migrateToLatest(first.db), migrateToLatest(second.db)]);

    // Between them every migration was applied once, each by whichever took the lock for that step
    // (a migration is a transaction of its own, src/db/migrate.ts), each in name order.
    expect(results.flat().sort()).toEqual(MIGRATIONS);
    for (const applied of results) expect(applied).toEqual([...applied].sort());

    const recorded = await sql<{ name: string }>`SELECT name FROM kysely_migration ORDER BY name`.execute(first.db);
    expect(recorded.rows.map((row) => row.name)).toEqual(MIGRATIONS);

    // The schema is there and usable from both handles.
    for (const handle of [first, second]) {
      const tables = await sql<{ count: number }>`
        SELECT count(*)::int AS count FROM information_schema.tables
        WHERE table_schema = 'public' AND table_name IN ('accounts', 'credentials', 'session_spaces', 'sessions', 'events')`.execute(handle.db);
      expect(tables.rows[0]?.count).toBe(5);
    }
  });

  it('apply nothing on the next start', async () => {
    for (const handle of handles) expect(await migrateToLatest(handle.db)).toEqual([]);
    const recorded = await sql<{ count: number }>`SELECT count(*)::int AS count FROM kysely_migration`.execute(handles[0]!.db);
    expect(recorded.rows[0]?.count).toBe(MIGRATIONS.length);
  });
});
