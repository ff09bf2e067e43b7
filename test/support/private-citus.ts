// A private Citus cluster for tests and benchmarks: a coordinator and two workers, each a private
// PostgreSQL (private-cluster.ts: initdb in a temporary directory, its own port, run as `postgres`
// when the tests run as root) with `shared_preload_libraries = 'citus'`, removed afterwards.
//
// Citus is installed by ../shared/citus/build.sh (Citus 13.2 for the machine's PostgreSQL 15). A
// database becomes part of the cluster with createClusterDatabase: it is created on every node, gets
// the extension on every node, and on the coordinator the nodes are registered in it
// (citus_set_coordinator_host, citus_add_node): Citus keeps its metadata per database.
import { execFile } from 'node:child_process';
import { existsSync, realpathSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { createPrivateCluster, findPostgresBinaries, type PrivateCluster } from './private-cluster.js';

const run = promisify(execFile);

/**
 * What every node runs with. enable_unsafe_triggers: the tables keep their triggers once
 * distributed (migrations/0004, 0005, 0011); deploy/citus/distribute.sql sets it for its own session
 * too, and the compose file sets it the same way.
 */
export const CITUS_SERVER_SETTINGS: Record<string, string> = {
  shared_preload_libraries: 'citus',
  'citus.enable_unsafe_triggers': 'on',
  max_prepared_transactions: '100',
  max_connections: '200',
  // Each node has its own maintenance daemon per Citus database, plus the rebalancer's jobs.
  max_worker_processes: '32',
  // Shard moves use logical replication.
  wal_level: 'logical',
};

export interface CitusNode {
  readonly name: 'coordinator' | 'worker1' | 'worker2';
  readonly cluster: PrivateCluster;
}

export interface PrivateCitus {
  readonly coordinator: PrivateCluster;
  readonly workers: readonly PrivateCluster[];
  readonly nodes: readonly CitusNode[];
  /** A database on every node with the extension, the workers registered on the coordinator's. */
  createDatabase(name: string): Promise<void>;
  /** Drops the database on every node. */
  dropDatabase(name: string): Promise<void>;
  /** Runs deploy/citus/distribute.sql (or another file) with psql on the coordinator's database, as an operator would. */
  psqlFile(database: string, file: string): Promise<string>;
  remove(): Promise<void>;
}

/** The real directory of the server binaries the private clusters use (initdb may be a symlink on PATH). */
function serverBinaries(): string | undefined {
  const bin = findPostgresBinaries();
  return bin && dirname(realpathSync(join(bin, 'initdb')));
}

/** Whether Citus is installed for the PostgreSQL the private clusters use. */
export function citusInstalled(): boolean {
  const bin = serverBinaries();
  return bin !== undefined && existsSync(join(bin, '..', 'lib', 'citus.so'));
}

export async function startPrivateCitus(options: { settings?: Record<string, string> } = {}): Promise<PrivateCitus> {
  if (!citusInstalled()) throw new Error('Citus is not installed: run ../shared/citus/build.sh (as root)');
  const settings = { ...CITUS_SERVER_SETTINGS, ...options.settings };
  const created = await Promise.allSettled([0, 1, 2].map(() => createPrivateCluster({ settings })));
  const clusters = created.flatMap((outcome) => (outcome.status === 'fulfilled' ? [outcome.value] : []));
  try {
    const failed = created.find((outcome) => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    await Promise.all(clusters.map((cluster) => cluster.start()));
  } catch (error) {
    await Promise.all(clusters.map((cluster) => cluster.remove()));
    throw error;
  }
  const [coordinator, ...workers] = clusters as [PrivateCluster, PrivateCluster, PrivateCluster];
  const nodes: CitusNode[] = [
    { name: 'coordinator', cluster: coordinator },
    { name: 'worker1', cluster: workers[0]! },
    { name: 'worker2', cluster: workers[1]! },
  ];
  const addresses = nodes.map(({ name, cluster }) => ({ name, port: cluster.port }));
  return {
    coordinator,
    workers,
    nodes,
    createDatabase: (name) => createCitusDatabase(addresses, name),
    dropDatabase: (name) => dropCitusDatabase(addresses, name),
    psqlFile: (database, file) => runPsqlFile(coordinator.port, database, file),
    async remove() {
      await Promise.all(clusters.map((cluster) => cluster.remove()));
    },
  };
}

/** A node of a cluster, by name and port (on 127.0.0.1, user postgres, trust): what a test file is given. */
export interface CitusNodeAddress {
  name: string;
  port: number;
}

export const nodeUrl = (port: number, database: string) => `postgres://postgres@127.0.0.1:${port}/${database}`;

/**
 * A database on every node with the extension, the nodes registered in the coordinator's (the first
 * address). Workers first: registering them on the coordinator syncs the metadata into their database.
 */
export async function createCitusDatabase(nodes: CitusNodeAddress[], name: string): Promise<void> {
  const [coordinator, ...workers] = nodes;
  for (const { port } of [...workers, coordinator!]) {
    await query(nodeUrl(port, 'postgres'), `CREATE DATABASE ${pg.escapeIdentifier(name)}`);
    await query(nodeUrl(port, name), 'CREATE EXTENSION IF NOT EXISTS citus');
  }
  await query(
    nodeUrl(coordinator!.port, name),
    `SELECT citus_set_coordinator_host('127.0.0.1', ${coordinator!.port});
     ${workers.map(({ port }) => `SELECT citus_add_node('127.0.0.1', ${port});`).join('\n')}`,
  );
}

export async function dropCitusDatabase(nodes: CitusNodeAddress[], name: string): Promise<void> {
  for (const { port } of nodes) {
    await query(nodeUrl(port, 'postgres'), `DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`).catch(() => undefined);
  }
}

/** Runs a file with psql on a database of the node at `port`, as an operator would (`psql -v ON_ERROR_STOP=1 -f`). */
export async function runPsqlFile(port: number, database: string, file: string): Promise<string> {
  const { stdout, stderr } = await run(join(serverBinaries()!, 'psql'), ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', nodeUrl(port, database), '-f', file], {
    timeout: 300_000,
  });
  return stdout + stderr;
}

/** One statement (or several, in one simple query) on a fresh connection. */
export async function query<R extends pg.QueryResultRow = Record<string, unknown>>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const result = await client.query<R>(text);
    return (Array.isArray(result) ? (result.at(-1) as pg.QueryResult<R>) : result).rows;
  } finally {
    await client.end();
  }
}
