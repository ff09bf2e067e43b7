// The `citus` vitest project's global setup: one private Citus cluster for the run
// (private-citus.ts), and on it a template database migrated and distributed the way an operator
// does it (`npm run migrate`, then deploy/citus/distribute.sql with psql). Each test file then gets
// a clone of the template on every node (test-database.ts): Citus keeps its metadata and shards per
// database, and the coordinator's clone reaches the workers' clones of the same name, so a clone is
// a distributed database of its own, ready at the cost of three CREATE DATABASE … TEMPLATE.
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';
import { openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import type { TestBackend } from './backend.js';
import { type PrivateCitus, query, startPrivateCitus } from './private-citus.js';

const DISTRIBUTE_SQL = fileURLToPath(new URL('../../deploy/citus/distribute.sql', import.meta.url));
const TEMPLATE = 'ass_citus_template';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The shared cluster's nodes (coordinator first), for the Citus tests that read them directly. */
    citusNodes: { name: string; port: number }[];
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const started = performance.now();
  const citus = await startPrivateCitus();
  try {
    await prepareTemplate(citus);
  } catch (error) {
    await citus.remove();
    throw error;
  }
  const backend: TestBackend = {
    kind: 'postgres',
    adminUrl: citus.coordinator.url('postgres'),
    template: TEMPLATE,
    source: 'a private Citus cluster',
    workerAdminUrls: citus.workers.map((worker) => worker.url('postgres')),
  };
  project.provide('testBackend', backend);
  project.provide('citusNodes', citus.nodes.map(({ name, cluster }) => ({ name, port: cluster.port })));
  console.log(`[tests] database backend: Citus 13.2, a coordinator and two workers (ready in ${Math.round(performance.now() - started)} ms)`);
  return () => citus.remove();
}

/** Migrated and distributed, then closed to connections on every node, so that it can be cloned. */
async function prepareTemplate(citus: PrivateCitus): Promise<void> {
  await citus.createDatabase(TEMPLATE);
  const handle = await openDatabase({ kind: 'postgres', url: citus.coordinator.url(TEMPLATE), poolMax: 1, statementTimeoutMs: 120_000, connectTimeoutMs: 10_000 });
  try {
    await migrateToLatest(handle.db);
  } finally {
    await handle.close();
  }
  await citus.psqlFile(TEMPLATE, DISTRIBUTE_SQL);
  // Citus's maintenance daemon keeps a connection to each of its databases; a template must have
  // none. A database that allows no connections keeps the daemon out.
  for (const { cluster } of citus.nodes) {
    await query(
      cluster.url('postgres'),
      `ALTER DATABASE ${TEMPLATE} WITH ALLOW_CONNECTIONS false;
       SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '${TEMPLATE}';`,
    );
  }
}
