// Planner statistics where autovacuum has not gathered them (src/db/planner-statistics.ts). Without
// statistics a session's key lookup plans as a tie between the primary key and the list indexes
// that start with (account, space), and PostgreSQL takes a list index: each append then walks its
// whole space. Run on both backends: PGlite plans the same way, and its autovacuum never runs.
import { type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase } from '../../src/db/connect.js';
import type { DB } from '../../src/db/schema.js';
import { analyzeDueTables, findTablesToAnalyze, startStatisticsKeeper } from '../../src/db/planner-statistics.js';
import { issueCredential } from '../../src/modules/accounts/credentials.js';
import { untilValue } from '../support/poll.js';
import { freePort, killServiceProcess, type ServiceProcess, startServiceProcess, waitUntilReady } from '../support/service-process.js';
import { createTestApp, type TestApp } from '../support/test-app.js';
import { type ClonedDatabase, cloneMigratedDatabase } from '../support/test-database.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const SESSIONS = 300;

/** `count` sessions of up to 30 users in the account's default space, one statement per table. */
async function insertSessions(prefix: string, count: number): Promise<void> {
  const { accountId, defaultSpaceId: spaceId } = t.account;
  const users = Math.min(count, 30);
  await sql`INSERT INTO space_users (account_id, space_id, user_id)
            SELECT ${accountId}, ${spaceId}, ${prefix} || '-user-' || n FROM generate_series(0, ${users - 1}) AS n`.execute(t.db);
  await sql`INSERT INTO sessions (account_id, space_id, user_id, session_id)
            SELECT ${accountId}, ${spaceId}, ${prefix} || '-user-' || (n % ${users}), ${prefix} || '-session-' || n
            FROM generate_series(0, ${count - 1}) AS n`.execute(t.db);
}

/** The index of the generic plan (the one PL/pgSQL and prepared statements keep) of a session lookup by its key. */
async function indexOfKeyLookup(db: Kysely<DB> = t.db): Promise<string> {
  return db.connection().execute(async (connection: Kysely<DB>) => {
    await sql`SET plan_cache_mode = force_generic_plan`.execute(connection);
    try {
      await sql`PREPARE key_lookup(text, text, text, text) AS
                UPDATE sessions SET event_count = event_count + 1
                WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4`.execute(connection);
      const { rows } = await sql<{ 'QUERY PLAN': string }>`EXPLAIN EXECUTE key_lookup('a', 's', 'u', 'k')`.execute(connection);
      await sql`DEALLOCATE key_lookup`.execute(connection);
      const scan = rows.map((row) => row['QUERY PLAN']).find((line) => line.includes('Index Scan'));
      return /Index Scan using (\S+)/.exec(scan ?? '')?.[1] ?? `no index scan: ${rows.map((row) => row['QUERY PLAN']).join(' / ')}`;
    } finally {
      await sql`RESET plan_cache_mode`.execute(connection);
    }
  });
}

interface TableStats {
  analyzes: number;
  n_mod_since_analyze: number;
}

async function statsOf(table: string): Promise<TableStats> {
  const { rows } = await sql<TableStats>`
    SELECT (analyze_count + autoanalyze_count)::int AS analyzes, n_mod_since_analyze::int
    FROM pg_stat_user_tables WHERE relname = ${table} AND schemaname = current_schema()`.execute(t.db);
  return rows[0]!;
}

/** Statistics reach pg_stat_user_tables when the writing backend next reports them (up to ~10 s on PostgreSQL). */
const untilStats = <T>(read: () => Promise<T>, done: (value: T) => boolean, what: string) =>
  untilValue(read, done, what, { timeoutMs: 20_000, intervalMs: 100 });

/** Holds a transaction open with `lock` taken until `release` resolves; answers once it is held. */
async function holding(lock: (trx: Kysely<DB>) => Promise<unknown>): Promise<{ release: () => Promise<void> }> {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let held!: () => void;
  const taken = new Promise<void>((resolve) => (held = resolve));
  const transaction = t.db.transaction().execute(async (trx) => {
    await lock(trx);
    held();
    await released;
  });
  await taken;
  return { release: async () => (release(), await transaction) };
}

describe('planner statistics', () => {
  it('analyzes a table that was never analyzed once enough rows changed, and the key lookup then plans on the primary key', async () => {
    await insertSessions('fresh', SESSIONS);
    // The hazard this guards against, on this very schema: without statistics the lookup takes a list index.
    expect(await indexOfKeyLookup()).not.toBe('sessions_pkey');
    await untilStats(() => statsOf('sessions'), (stats) => stats.n_mod_since_analyze >= SESSIONS, 'the inserted sessions to be counted');
    expect(await findTablesToAnalyze(t.db)).toContain('sessions');

    const before = await statsOf('sessions');
    const timeoutBefore = (await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(t.db)).rows[0]!.statement_timeout;
    expect(await analyzeDueTables(t.db)).toContain('sessions');

    expect(await indexOfKeyLookup()).toBe('sessions_pkey');
    await untilStats(() => statsOf('sessions'), (stats) => stats.analyzes > before.analyzes, 'the ANALYZE of sessions to be counted');
    expect(await findTablesToAnalyze(t.db)).not.toContain('sessions');
    expect((await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(t.db)).rows[0]!.statement_timeout).toBe(timeoutBefore);
  });

  it('analyzes an analyzed table again only where autovacuum will not: when it is off', async () => {
    const { rows } = await sql<{ on: boolean }>`SELECT current_setting('autovacuum')::boolean AND current_setting('track_counts')::boolean AS on`.execute(t.db);
    const before = await statsOf('sessions');
    expect(before.analyzes).toBeGreaterThan(0); // the test above analyzed it
    await insertSessions('more', SESSIONS);
    await untilStats(() => statsOf('sessions'), (stats) => stats.n_mod_since_analyze >= SESSIONS, 'the new sessions to be counted');
    // With autovacuum on, its next run takes the table; with it off, nothing else will.
    expect((await findTablesToAnalyze(t.db)).includes('sessions')).toBe(!rows[0]!.on);
  });

  it.runIf(inject('testBackend').kind === 'postgres')('passes a table by while another instance analyzes it, or while maintenance holds its lock (PostgreSQL: a second connection holds the lock)', async () => {
    await insertSessions('busy', SESSIONS);
    await untilStats(() => findTablesToAnalyze(t.db), (tables) => tables.includes('space_users'), 'space_users to be due');

    // Another instance holds the table's advisory lock: passed by at once.
    const instance = await holding((trx) => sql`SELECT pg_advisory_xact_lock(hashtextextended(${JSON.stringify(['analyze', 'space_users'])}, 0))`.execute(trx));
    try {
      expect(await analyzeDueTables(t.db)).not.toContain('space_users');
    } finally {
      await instance.release();
    }
    // A VACUUM or CREATE INDEX holds the lock ANALYZE needs: passed by after the lock wait, no error.
    const maintenance = await holding((trx) => sql`LOCK TABLE space_users IN SHARE UPDATE EXCLUSIVE MODE`.execute(trx));
    try {
      expect(await analyzeDueTables(t.db)).not.toContain('space_users');
    } finally {
      await maintenance.release();
    }
    expect(await analyzeDueTables(t.db)).toContain('space_users');
  });

  it('runs on its timer until stopped, and logs what it analyzed', async () => {
    const logged: { fields: object; message: string }[] = [];
    const log = (fields: object, message: string) => logged.push({ fields, message });
    const logger = { debug: log, info: log, error: log };
    // events, never analyzed so far in this database, past the threshold of 50 changed rows.
    const url = `/v1/spaces/${t.account.defaultSpaceId}/users/timer-user-0/sessions/timer-session-0/events`;
    await insertSessions('timer', 1);
    for (let n = 0; n < 60; n++) expect((await t.request({ method: 'POST', url, payload: { author: 'user' } })).statusCode).toBe(201);
    await untilStats(() => findTablesToAnalyze(t.db), (tables) => tables.includes('events'), 'events to be due');
    const keeper = startStatisticsKeeper(t.db, { intervalMs: 50, logger });
    try {
      await untilValue(() => logged.length, (count) => count > 0, 'the keeper to run');
    } finally {
      await keeper.stop();
    }
    expect(logged[0]).toMatchObject({ message: 'planner statistics gathered', fields: { analyzed: expect.arrayContaining(['events']) } });
    expect(logged.filter((entry) => entry.message === 'gathering planner statistics failed')).toEqual([]);
  });

  it('gathers statistics for the columns rows are looked up by, and passes the payloads and states by (migration 0019)', async () => {
    // Last: it analyzes events and sessions itself, which the tests above need not yet analyzed.
    await insertSessions('columns', 1);
    const session = `/v1/spaces/${t.account.defaultSpaceId}/users/columns-user-0/sessions/columns-session-0`;
    for (let n = 0; n < 20; n++) {
      const event = {
        invocationId: `inv-${n}`,
        author: n % 2 ? 'user' : 'agent',
        content: { role: 'model', parts: [{ text: `turn ${n}` }, { functionCall: { name: 'lookup', args: { n } } }] },
        actions: { stateDelta: { counter: n } },
        metadata: { turn: n },
        extensions: { trace: `t-${n}` },
        errorCode: n % 5 ? undefined : 'E_TOOL',
        errorMessage: n % 5 ? undefined : 'the tool failed',
      };
      expect((await t.request({ method: 'POST', url: `${session}/events`, payload: event })).statusCode).toBe(201);
    }
    expect((await t.request({ method: 'PUT', url: `${session}/context`, payload: { memo: { summary: 'so far' } } })).statusCode).toBe(200);
    await sql`ANALYZE events`.execute(t.db);
    await sql`ANALYZE sessions`.execute(t.db);

    const analyzedColumns = async (table: string) =>
      (await sql<{ column: string }>`SELECT attname AS column FROM pg_stats WHERE schemaname = current_schema() AND tablename = ${table} ORDER BY attname`.execute(t.db)).rows.map((row) => row.column);
    // Keys, order and the list filters (events-list: author, after/before on the event time).
    expect(await analyzedColumns('events')).toEqual(['account_id', 'author', 'event_id', 'event_time', 'seq', 'session_id', 'space_id', 'user_id'].sort());
    // Sessions: keys, the list orders and filters (times, title search, metadata) and the counters.
    const sessionColumns = await analyzedColumns('sessions');
    expect(sessionColumns).toEqual(expect.arrayContaining(['account_id', 'space_id', 'user_id', 'session_id', 'title', 'metadata', 'update_time', 'create_time', 'expire_time']));
    for (const column of ['state', 'memo', 'initial_state']) expect(sessionColumns).not.toContain(column);

    // Exactly the migration's columns have a target of 0; every other keeps the default.
    const { rows } = await sql<{ table: string; column: string }>`
      SELECT c.relname AS table, a.attname AS column
      FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
      WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attnum > 0 AND NOT a.attisdropped AND a.attstattarget = 0
      ORDER BY c.relname, a.attname`.execute(t.db);
    expect(rows.map((row) => `${row.table}.${row.column}`)).toEqual(
      [
        ...['invocation_id', 'content', 'actions', 'metadata', 'extensions', 'error_code', 'error_message', 'create_time', 'payload_hash'].map((column) => `events.${column}`),
        'session_spaces.state',
        ...['state', 'memo', 'initial_state'].map((column) => `sessions.${column}`),
        'space_users.state',
        'state_checkpoints.state',
      ].sort(),
    );
  });
});

// The server starts the keeper itself: a fresh database, sessions created through the API, and the
// key lookup is planned on the primary key without anyone running ANALYZE. PostgreSQL: the check
// reads the database from a second connection while the server runs.
const backend = inject('testBackend');
describe.runIf(backend.kind === 'postgres')('the server process (PostgreSQL)', () => {
  let database: ClonedDatabase | undefined;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    database = await cloneMigratedDatabase('ass_analyze');
  });
  afterAll(async () => {
    killServiceProcess(service);
    await service?.exited;
    await database?.drop();
  });

  it('analyzes the sessions of a fresh database on its own, and its key lookup then plans on the primary key', { timeout: 60_000 }, async () => {
    const token = issueCredential().token;
    service = startServiceProcess({
      DATABASE_URL: database!.url,
      ROOT_API_KEY: token,
      PORT: String(await freePort()),
      LOG_LEVEL: 'info',
      RATE_LIMIT_MAX: '0',
      ANALYZE_INTERVAL_MS: '200',
    });
    await waitUntilReady(service);
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const space = await fetch(`${service.baseUrl}/v1/spaces`, { method: 'POST', headers, body: JSON.stringify({ name: 'statistics' }) });
    const { spaceId } = (await space.json()) as { spaceId: string };
    for (let n = 0; n < SESSIONS; n++) {
      const created = await fetch(`${service.baseUrl}/v1/spaces/${spaceId}/users/u${n % 30}/sessions`, { method: 'POST', headers, body: JSON.stringify({ sessionId: `s${n}` }) });
      expect(created.status).toBe(201);
    }

    const gathered = (analyzed: string) =>
      service!.logLines().some((line) => line.msg === 'planner statistics gathered' && (line.analyzed as string[]).includes(analyzed));
    await untilValue(() => gathered('sessions'), (done) => done, 'the server to analyze sessions', { timeoutMs: 30_000, intervalMs: 100 });

    const reader = await openDatabase({ kind: 'postgres', url: database!.url, poolMax: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
    try {
      expect(await indexOfKeyLookup(reader.db)).toBe('sessions_pkey');
    } finally {
      await reader.close();
    }
    expect(service.logLines().filter((line) => line.msg === 'gathering planner statistics failed')).toEqual([]);
    service.child.kill('SIGTERM');
    expect(await service.exited).toEqual({ code: 0, signal: null });
  });
});
