// Chooses the database the suite runs on, once per run:
//   TEST_DB=pglite          → embedded PGlite, one in-memory instance per test file;
//   TEST_DATABASE_URL=…     → that PostgreSQL server;
//   a Docker engine         → a throwaway PostgreSQL container (testcontainers);
//   otherwise               → PGlite, so `npm test` passes on any fresh machine, announced in one
//                             line (the PostgreSQL-only tests are then skipped).
// On PostgreSQL a template database is migrated once and each test file clones it; on PGlite a data
// directory is migrated once and each test file restores its snapshot (initdb costs seconds).
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { type TestBackend, withDatabase } from './backend.js';

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { backend, stop } = await chooseBackend();
  project.provide('testBackend', backend);
  console.log(`[tests] database backend: ${backend.kind === 'postgres' ? `PostgreSQL (${backend.source})` : 'PGlite'}`);
  return async () => {
    if (backend.kind === 'postgres') {
      const admin = new pg.Client({ connectionString: backend.adminUrl });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${backend.template}" WITH (FORCE)`);
      await admin.end();
    }
    else await rm(join(backend.dataDir, '..'), { recursive: true, force: true });
    await stop?.();
  };
}

async function chooseBackend(): Promise<{ backend: TestBackend; stop?: () => Promise<void> }> {
  if (process.env.TEST_DB === 'pglite') return { backend: await preparePgliteSnapshot() };
  if (process.env.TEST_DATABASE_URL) {
    return { backend: await prepareTemplate(process.env.TEST_DATABASE_URL, 'TEST_DATABASE_URL') };
  }
  if (process.env.DOCKER_HOST || existsSync('/var/run/docker.sock')) {
    try {
      const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
      const container = await new PostgreSqlContainer('postgres:16-alpine').start();
      return { backend: await prepareTemplate(container.getConnectionUri(), 'testcontainers'), stop: async () => void (await container.stop()) };
    } catch (error) {
      console.warn(`[tests] Docker is not usable (${(error as Error).message}); falling back to PGlite`);
    }
  }
  console.warn(
    '[tests] no TEST_DATABASE_URL, TEST_DB or Docker engine: running on embedded PGlite, where the PostgreSQL-only tests are skipped ' +
      '(TEST_DATABASE_URL=postgres://… runs them; TEST_DB=pglite chooses PGlite without this line)',
  );
  return { backend: await preparePgliteSnapshot() };
}

async function preparePgliteSnapshot(): Promise<TestBackend> {
  const directory = await mkdtemp(join(tmpdir(), 'ass-pglite-template-'));
  const dataDir = join(directory, 'data');
  const handle = await openDatabase({ kind: 'pglite', dataDir, statementTimeoutMs: 60_000 });
  await migrateToLatest(handle.db);
  await handle.close();
  const { PGlite } = await import('@electric-sql/pglite');
  const { pg_trgm } = await import('@electric-sql/pglite/contrib/pg_trgm');
  const pglite = await PGlite.create(dataDir, { extensions: { pg_trgm } });
  const snapshot = join(directory, 'snapshot.tar');
  // Uncompressed: gunzipping in every test file would cost more than reading a larger file.
  await writeFile(snapshot, Buffer.from(await (await pglite.dumpDataDir('none')).arrayBuffer()));
  await pglite.close();
  return { kind: 'pglite', snapshot, dataDir };
}

async function prepareTemplate(adminUrl: string, source: string): Promise<TestBackend> {
  const template = `ass_template_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${template}"`);
  await admin.end();
  const handle = await openDatabase({ kind: 'postgres', url: withDatabase(adminUrl, template), poolMax: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  await migrateToLatest(handle.db);
  await handle.close();
  return { kind: 'postgres', adminUrl, template, source };
}
