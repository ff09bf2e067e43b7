// A private, migrated database for one test file: a clone of the template on PostgreSQL, a fresh
// in-memory instance on PGlite. Dropped when the file is done.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { inject } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { withDatabase } from './backend.js';

export interface TestDatabase extends DatabaseHandle {
  /** Closes the connections and drops the database. */
  dispose(): Promise<void>;
}

export async function createTestDatabase(options: { poolMax?: number } = {}): Promise<TestDatabase> {
  const backend = inject('testBackend');
  if (backend.kind === 'pglite') {
    const handle = await openDatabase({ kind: 'pglite', dataDir: undefined, statementTimeoutMs: 60_000 });
    await migrateToLatest(handle.db);
    return { ...handle, dispose: () => handle.close() };
  }
  const name = `ass_test_${randomBytes(6).toString('hex')}`;
  await adminQuery(backend.adminUrl, `CREATE DATABASE "${name}" TEMPLATE "${backend.template}"`);
  const handle = await openDatabase({
    kind: 'postgres',
    url: withDatabase(backend.adminUrl, name),
    poolMax: options.poolMax ?? 10,
    statementTimeoutMs: 60_000,
    connectTimeoutMs: 10_000,
  });
  return {
    ...handle,
    async dispose() {
      await handle.close();
      await adminQuery(backend.adminUrl, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    },
  };
}

async function adminQuery(adminUrl: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminUrl });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
