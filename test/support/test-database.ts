// A private, migrated database for one test file: a clone of the template on PostgreSQL, an
// in-memory instance restored from the migrated snapshot on PGlite. Dropped when the file is done.
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { inject } from 'vitest';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { withDatabase } from './backend.js';

export interface TestDatabase extends DatabaseHandle {
  /** Closes the connections and drops the database. */
  dispose(): Promise<void>;
}

export async function createTestDatabase(options: { poolMax?: number; poolPerAccount?: number; connectTimeoutMs?: number; idleTimeoutMs?: number } = {}): Promise<TestDatabase> {
  const backend = inject('testBackend');
  if (backend.kind === 'pglite') {
    const snapshot = new Blob([await readFile(backend.snapshot)]);
    const handle = await openDatabase({ kind: 'pglite', dataDir: undefined, statementTimeoutMs: 60_000, snapshot, idleTimeoutMs: options.idleTimeoutMs });
    return { ...handle, dispose: () => handle.close() };
  }
  const clone = await cloneMigratedDatabase('ass_test');
  const handle = await openDatabase({
    kind: 'postgres',
    url: clone.url,
    poolMax: options.poolMax ?? 10,
    poolPerAccount: options.poolPerAccount,
    statementTimeoutMs: 60_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
    idleTimeoutMs: options.idleTimeoutMs,
  });
  return {
    ...handle,
    async dispose() {
      await handle.close();
      await clone.drop();
    },
  };
}

/** A migrated database of its own on the test server, for a test that connects to it its own way. */
export interface ClonedDatabase {
  name: string;
  url: string;
  /** Drops it, ending any connection still open to it. */
  drop(): Promise<void>;
}

/**
 * A clone of the migrated template under a new name starting with `prefix` (PostgreSQL only): what
 * createTestDatabase opens a pool on, and what a test hands to a server process or a command. On
 * Citus the clone is made on every node (citus-global-setup.ts), the workers' first.
 */
export async function cloneMigratedDatabase(prefix: string): Promise<ClonedDatabase> {
  const backend = inject('testBackend');
  if (backend.kind !== 'postgres') throw new Error('cloneMigratedDatabase needs the PostgreSQL backend');
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const servers = [...(backend.workerAdminUrls ?? []), backend.adminUrl];
  for (const server of servers) await adminQuery(server, `CREATE DATABASE "${name}" TEMPLATE "${backend.template}"`);
  return {
    name,
    url: withDatabase(backend.adminUrl, name),
    async drop() {
      for (const server of [...servers].reverse()) await adminQuery(server, `DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
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
