// deploy/citus/distribute.sql on the real cluster: from an empty database and from one that holds
// data (a single-node deployment moving to Citus), run twice with psql, then the catalog: the
// partition kinds and one colocation group, the layout rules (test/support/citus-layout.ts) on the
// live schema, and the rows copied into shards on the workers, none lost. And the next release: a
// migration that changes distributed tables, applied (`npm run migrate`) to a database that was
// distributed before it existed, reaches every shard.
import { randomBytes } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Kysely, sql } from 'kysely';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createAccount } from '../../src/modules/accounts/accounts.service.js';
import { citusLayoutViolations, readCitusLayout } from '../support/citus-layout.js';
import { createCitusDatabase, dropCitusDatabase, nodeUrl, query, runPsqlFile } from '../support/private-citus.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

const DISTRIBUTE_SQL = fileURLToPath(new URL('../../deploy/citus/distribute.sql', import.meta.url));
const TENANT_TABLES = ['session_spaces', 'space_users', 'sessions', 'session_catalog', 'events', 'state_checkpoints'];
const REFERENCE_TABLES = ['accounts', 'principals', 'credentials', 'policies'];
const ALL_TABLES = [...REFERENCE_TABLES, ...TENANT_TABLES];

const nodes = inject('citusNodes');
const coordinatorPort = nodes[0]!.port;
const created: string[] = [];
const handles: DatabaseHandle[] = [];

afterAll(async () => {
  for (const handle of handles) await handle.close();
  for (const name of created) await dropCitusDatabase(nodes, name);
});

/** A new database on every node, migrated on the coordinator as `npm run migrate` does, not yet distributed. */
async function migratedDatabase(migrationsDirectory?: string): Promise<{ name: string; handle: DatabaseHandle }> {
  const name = `ass_distribute_${randomBytes(4).toString('hex')}`;
  created.push(name);
  await createCitusDatabase(nodes, name);
  const handle = await openDatabase({ kind: 'postgres', url: nodeUrl(coordinatorPort, name), poolMax: 4, statementTimeoutMs: 120_000, connectTimeoutMs: 10_000 });
  handles.push(handle);
  await migrateToLatest(handle.db, migrationsDirectory);
  return { name, handle };
}

async function rowCounts(db: Kysely<unknown>): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of ALL_TABLES) {
    counts[table] = Number((await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(db)).rows[0]!.n);
  }
  return counts;
}

/** Each shard's answer (`success result`) to `command`, run on every shard of `table` (`%s` is the shard). */
async function onEveryShard(database: string, table: string, command: string): Promise<string[]> {
  const shards = await query<{ success: boolean; result: string }>(
    nodeUrl(coordinatorPort, database),
    `SELECT success, result FROM run_command_on_shards('${table}', $command$${command}$command$)`,
  );
  return shards.map((shard) => `${shard.success} ${shard.result}`);
}

/**
 * Each shard's answer (`success result`) for `table`: the definitions of its indexes whose names
 * match `namePattern`, without the names, in name order.
 */
const shardIndexes = (database: string, table: string, namePattern: string) =>
  onEveryShard(
    database,
    table,
    `SELECT string_agg(regexp_replace(pg_get_indexdef(indexrelid), '^CREATE (UNIQUE )?INDEX \\S+ ON \\S+ ', ''), ' | ' ORDER BY indexrelid::regclass::text)
     FROM pg_index WHERE indrelid = '%s'::regclass AND indexrelid::regclass::text ~ '${namePattern}'`,
  );

/** Per shard of `table`: its columns for which `condition` (on pg_attribute) holds, in name order. */
const shardColumnsWhere = (database: string, table: string, condition: string) =>
  onEveryShard(database, table, `SELECT string_agg(attname, ' ' ORDER BY attname) FROM pg_attribute WHERE attrelid = '%s'::regclass AND attnum > 0 AND ${condition}`);

/** Every shard of each table in `expected` has exactly its columns (`true <names>`) for which `condition` holds. */
async function expectShardColumns(database: string, condition: string, expected: Record<string, string>): Promise<void> {
  for (const [table, columns] of Object.entries(expected)) {
    const shards = await shardColumnsWhere(database, table, condition);
    expect(shards.length).toBeGreaterThan(1);
    expect(new Set(shards)).toEqual(new Set([columns]));
  }
}

/** Every shard of events and sessions carries 0019's targets: ANALYZE on the workers passes the payloads and states by. */
const expectShardStatisticsTargets = (database: string) =>
  expectShardColumns(database, 'attstattarget = 0', {
    events: 'true actions content create_time error_code error_message extensions invocation_id metadata payload_hash',
    sessions: 'true initial_state memo state',
  });

/** Every shard of the tenant tables writes its stored JSON with lz4 (migration 0020), as the tables on one PostgreSQL do. */
const expectShardCompression = (database: string) =>
  expectShardColumns(database, "attcompression = 'l'", {
    events: 'true actions content extensions metadata',
    sessions: 'true initial_state memo metadata state',
    session_catalog: 'true metadata',
    state_checkpoints: 'true state',
    space_users: 'true state',
    session_spaces: 'true state',
  });

async function expectTheLayout(db: Kysely<unknown>): Promise<void> {
  const partitions = (
    await sql<{ table: string; partmethod: string; repmodel: string; colocationid: number }>`
      SELECT logicalrelid::text AS table, partmethod, repmodel, colocationid FROM pg_dist_partition ORDER BY 1`.execute(db)
  ).rows;
  expect(partitions.map((p) => p.table).sort()).toEqual([...ALL_TABLES].sort());
  for (const table of TENANT_TABLES) expect(partitions.find((p) => p.table === table)).toMatchObject({ partmethod: 'h' });
  // 'n' with two-phase replication ('t') is a reference table; a Citus local table would be 'n' with 's'.
  for (const table of REFERENCE_TABLES) expect(partitions.find((p) => p.table === table)).toMatchObject({ partmethod: 'n', repmodel: 't' });
  expect(new Set(partitions.filter((p) => p.partmethod === 'h').map((p) => p.colocationid)).size).toBe(1);
  // The append functions are distributed by their first argument (p_account_id), colocated with sessions.
  const functions = (
    await sql<{ name: string; argument: number; colocated: boolean }>`
      SELECT objid::regprocedure::text AS name, distribution_argument_index AS argument,
             colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'sessions'::regclass) AS colocated
      FROM pg_dist_object WHERE classid = 'pg_proc'::regclass AND distribution_argument_index IS NOT NULL ORDER BY 1`.execute(db)
  ).rows;
  expect(functions).toEqual([
    { name: 'append_events(text,text,text,text,jsonb,bigint[],integer)', argument: 0, colocated: true },
    { name: 'append_events_of_account(text,jsonb,integer,integer)', argument: 0, colocated: true },
  ]);
  // The rules the layout test checks on one PostgreSQL hold on the distributed schema too.
  expect(await citusLayoutViolations(db, 'public', readCitusLayout(DISTRIBUTE_SQL, ['kysely_migration', 'kysely_migration_lock']))).toEqual([]);
}

describe('distribute.sql on a Citus cluster', () => {
  it('distributes an empty database, and a second run changes nothing', async () => {
    const { name, handle } = await migratedDatabase();
    await runPsqlFile(coordinatorPort, name, DISTRIBUTE_SQL);
    const db = handle.db as unknown as Kysely<unknown>;
    await expectTheLayout(db);
    // Distributed after 0019: the shards were made from tables that carry its statistics targets.
    await expectShardStatisticsTargets(name);
    await expectShardCompression(name);
    const shardsBefore = await query(nodeUrl(coordinatorPort, name), 'SELECT shardid, nodeport FROM citus_shards ORDER BY 1, 2');
    await runPsqlFile(coordinatorPort, name, DISTRIBUTE_SQL);
    await expectTheLayout(db);
    expect(await query(nodeUrl(coordinatorPort, name), 'SELECT shardid, nodeport FROM citus_shards ORDER BY 1, 2')).toEqual(shardsBefore);
  });

  it('distributes a database that holds data: every row is copied into the shards, none lost, and the service goes on', async () => {
    const { name, handle } = await migratedDatabase();
    // A single-node deployment's data: accounts with sessions, events, user and space state, a sub-account.
    const app = await buildApp({ db: handle.db, limits: DEFAULT_LIMITS, pageTokenKey: TEST_PAGE_TOKEN_KEY, logger: false });
    const accounts = [];
    for (let a = 0; a < 4; a++) accounts.push(await createAccount(handle.db, `moving-${a}`));
    const call = (token: string, method: 'GET' | 'POST', url: string, payload?: object) =>
      app.inject({ method, url, payload, headers: { authorization: `Bearer ${token}` } });
    for (const account of accounts) {
      const token = account.rootCredential.token;
      const base = `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions`;
      expect((await call(token, 'POST', '/v1/iam/subaccounts', { name: 'reader' })).statusCode).toBe(201);
      for (let s = 0; s < 3; s++) {
        expect((await call(token, 'POST', base, { sessionId: `s${s}` })).statusCode).toBe(201);
        const events = Array.from({ length: 5 }, (_, i) => ({ author: 'user', actions: { stateDelta: { [`k${i}`]: i, 'user:seen': i, 'app:last': s } } }));
        expect((await call(token, 'POST', `${base}/s${s}/events`, { events })).statusCode).toBe(201);
      }
    }
    const db = handle.db as unknown as Kysely<unknown>;
    const before = await rowCounts(db);
    expect(before).toMatchObject({ accounts: 4, sessions: 12, session_catalog: 12, events: 60 });

    await runPsqlFile(coordinatorPort, name, DISTRIBUTE_SQL);
    await runPsqlFile(coordinatorPort, name, DISTRIBUTE_SQL);
    await expectTheLayout(db);
    expect(await rowCounts(db)).toEqual(before);
    // The rows are in the shards, on both workers.
    const placed = await query<{ nodeport: number; rows: string }>(
      nodeUrl(coordinatorPort, name),
      `SELECT s.nodeport, sum(r.result::bigint) AS rows
       FROM run_command_on_shards('events', 'SELECT count(*) FROM %s') r JOIN citus_shards s USING (shardid)
       GROUP BY 1 ORDER BY 1`,
    );
    expect(placed.map((p) => p.nodeport).sort()).toEqual(nodes.slice(1).map((n) => n.port).sort());
    expect(placed.reduce((sum, p) => sum + Number(p.rows), 0)).toBe(60);

    // The service goes on where it stopped: the next append of a session is seq 6, its state intact.
    const [first] = accounts;
    const appended = await call(first!.rootCredential.token, 'POST', `/v1/spaces/${first!.defaultSpaceId}/users/u1/sessions/s0/events`, { author: 'user' });
    expect(appended.statusCode).toBe(201);
    expect(appended.json().events[0].seq).toBe(6);
    expect(appended.json().session.state).toMatchObject({ k0: 0, k4: 4, 'user:seen': 4, 'app:last': 2 });
    await app.close();
  });

  it('applies later migrations that change distributed tables (0015, 0017, 0018, 0019, 0020) and functions (0016) to a database distributed before them: every shard and worker gets them', async () => {
    // The release before 0015: its migrations alone, then distributed as an operator does.
    const MIGRATIONS = fileURLToPath(new URL('../../migrations/', import.meta.url));
    const earlier = mkdtempSync(join(tmpdir(), 'ass-migrations-'));
    try {
      for (const file of readdirSync(MIGRATIONS).filter((file) => file < '0015')) cpSync(join(MIGRATIONS, file), join(earlier, file));
      const { name, handle } = await migratedDatabase(`${earlier}/`);
      await runPsqlFile(coordinatorPort, name, DISTRIBUTE_SQL);
      // Sessions stored before 0018, in two accounts (two shards at least): its catalog must list them.
      const url = nodeUrl(coordinatorPort, name);
      for (const account of ['acct-a', 'acct-b']) {
        await query(url, `INSERT INTO accounts (account_id, name) VALUES ('${account}', '${account}')`);
        await query(url, `INSERT INTO session_spaces (account_id, space_id, name) VALUES ('${account}', 'space-1', 'one')`);
        await query(url, `INSERT INTO space_users (account_id, space_id, user_id) VALUES ('${account}', 'space-1', 'u')`);
        await query(url, `INSERT INTO sessions (account_id, space_id, user_id, session_id, title) VALUES ('${account}', 'space-1', 'u', 'old', 'before 0018')`);
      }

      expect(await migrateToLatest(handle.db)).toEqual([
        '0015_partial_session_search_indexes',
        '0016_apply_state_deltas_one_step',
        '0017_events_covering_key',
        '0018_session_catalog',
        '0019_statistics_for_planned_columns',
        '0020_lz4_for_stored_json',
        '0021_state_written_out_once',
      ]);
      // 0019 on tables already distributed, which Citus refuses to alter: every shard has its targets all the same.
      await expectShardStatisticsTargets(name);
      // 0020 likewise: every shard compresses its stored JSON with lz4.
      await expectShardCompression(name);
      // 0018 distributed its table itself: the layout holds before distribute.sql runs again.
      await expectTheLayout(handle.db as unknown as Kysely<unknown>);
      await runPsqlFile(coordinatorPort, name, DISTRIBUTE_SQL); // as after every deployment
      await expectTheLayout(handle.db as unknown as Kysely<unknown>);
      // The catalog holds the sessions stored before it, and its trigger runs on every shard of
      // sessions: a new session is listed, a new title replaces the old, a deleted session goes.
      const catalog = () => query<{ account_id: string; session_id: string; title: string }>(url, 'SELECT account_id, session_id, title FROM session_catalog ORDER BY 1, 2');
      expect(await catalog()).toEqual([
        { account_id: 'acct-a', session_id: 'old', title: 'before 0018' },
        { account_id: 'acct-b', session_id: 'old', title: 'before 0018' },
      ]);
      await query(url, `INSERT INTO sessions (account_id, space_id, user_id, session_id, title) VALUES ('acct-a', 'space-1', 'u', 'new', 'after 0018'), ('acct-b', 'space-1', 'u', 'new', 'after 0018')`);
      await query(url, `UPDATE sessions SET title = 'renamed' WHERE session_id = 'old'`);
      await query(url, `DELETE FROM sessions WHERE account_id = 'acct-b' AND session_id = 'new'`);
      expect(await catalog()).toEqual([
        { account_id: 'acct-a', session_id: 'new', title: 'after 0018' },
        { account_id: 'acct-a', session_id: 'old', title: 'renamed' },
        { account_id: 'acct-b', session_id: 'old', title: 'renamed' },
      ]);
      // Each shard of sessions keeps its primary key, the update-time lists, the expiry index and
      // 0015's partial search indexes; each shard of the catalog has the lists by create time, the
      // session id lookup and search indexes of its own.
      const sessionShards = await shardIndexes(name, 'sessions', '.*');
      expect(sessionShards.length).toBeGreaterThan(1);
      expect(new Set(sessionShards)).toEqual(
        new Set([
          'true USING btree (expire_time) WHERE (expire_time IS NOT NULL) | ' +
            "USING gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops) WHERE (metadata <> '{}'::jsonb) | " +
            'USING btree (account_id, space_id, user_id, session_id) | ' +
            'USING btree (account_id, space_id, update_time, user_id, session_id) | ' +
            "USING gin (title gin_trgm_ops) WHERE (title <> ''::text) | " +
            'USING btree (account_id, space_id, user_id, update_time, session_id)',
        ]),
      );
      const catalogShards = await shardIndexes(name, 'session_catalog', '.*');
      expect(catalogShards.length).toBe(sessionShards.length);
      expect(new Set(catalogShards)).toEqual(
        new Set([
          "true USING gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops) WHERE (metadata <> '{}'::jsonb) | " +
            'USING btree (account_id, space_id, user_id, session_id) | ' +
            'USING btree (account_id, space_id, create_time, user_id, session_id) | ' +
            'USING btree (account_id, space_id, session_id) | ' +
            "USING gin (title gin_trgm_ops) WHERE (title <> ''::text) | " +
            'USING btree (account_id, space_id, user_id, create_time, session_id)',
        ]),
      );
      // Each shard of events has 0017's primary key, carrying author and event_time, and neither
      // of the two indexes it replaced.
      const eventShards = await shardIndexes(name, 'events', '.*'); // every index
      expect(eventShards.length).toBeGreaterThan(1);
      expect(new Set(eventShards)).toEqual(
        new Set([
          'true USING btree (account_id, space_id, user_id, session_id, event_id) | ' +
            'USING btree (account_id, space_id, user_id, session_id, seq) INCLUDE (author, event_time)',
        ]),
      );
      // A later change of a distributed function (0016's apply_state_deltas) reaches every worker,
      // which runs it for the appends delegated to it.
      expect(await migrateToLatest(handle.db)).toEqual([]);
      const workers = await query<{ success: boolean; result: string }>(
        nodeUrl(coordinatorPort, name),
        `SELECT success, result FROM run_command_on_workers($command$
           SELECT position('One step, the append of one event' IN prosrc) > 0 FROM pg_proc WHERE proname = 'apply_state_deltas'
         $command$)`,
      );
      expect(workers.length).toBeGreaterThan(0);
      expect(workers.map((worker) => `${worker.success} ${worker.result}`)).toEqual(workers.map(() => 'true t'));
    } finally {
      rmSync(earlier, { recursive: true, force: true });
    }
  });
});
