// Append throughput (issue 5): 32 concurrent HTTP clients append one event with a one-key
// stateDelta to 1,000 sessions of the real server (a child process running src/server.ts), and,
// in the same run against the same database, the ceiling: the identical transaction issued
// straight through `pg` by 32 concurrent workers over a pool of the service's size.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:append
//
// Creates and drops its own database. Environment: BENCH_DURATION (seconds per measured run,
// default 20), BENCH_WARMUP (untimed seconds before each, default 5), BENCH_ROUNDS (rounds of
// service and ceilings, default 1; the summary takes the median), DB_POOL_MAX (the service's pool
// and the ceiling's, default: the service's default), BENCH_SESSIONS (default 1000),
// BENCH_CPU_PROF (a directory: the server writes a .cpuprofile there when it stops),
// BENCH_KEEP_DATABASE (keep the database for inspection).
//
// Two ceilings are measured: the append's transaction alone (the definition), and the
// transaction preceded by the credential lookup every request makes, i.e. all of the database
// work of one request. CPU time per request is read from /proc for the server, this process (the
// load generator, or the ceiling's client) and the PostgreSQL backends of the bench database.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import { Kysely, PostgresDialect } from 'kysely';
import type pg from 'pg';
import { DEFAULT_LIMITS, loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import type { DB } from '../src/db/schema.js';
import { authenticate, createAccount } from '../src/modules/accounts/accounts.service.js';
import { appendEvents } from '../src/modules/events/append.service.js';
import { freePort, rssOfProcess, startServer, stopServer, waitReady } from './server-process.js';
import { createBenchDatabase, percentile, rssMiB } from './support.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 20);
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1_000);
const CONNECTIONS = 32;
const SESSIONS_PER_USER = 10;
const POOL_MAX = serviceDatabaseOptions('postgres://localhost/db').poolMax;
const RUN = randomBytes(3).toString('hex');
const CLOCK_TICKS = 100; // USER_HZ: /proc/<pid>/stat counts CPU time in 1/100 s

// The event every request appends (its id and delta value vary): ~200 bytes, an agent's turn.
const eventBody = (eventId: string, n: number) =>
  JSON.stringify({
    eventId,
    author: 'agent',
    content: { role: 'model', parts: [{ text: `turn ${n}: the quick brown fox jumps over the lazy dog` }] },
    actions: { stateDelta: { counter: n } },
  });

const sessionOf = (i: number) => ({ userId: `user-${Math.floor(i / SESSIONS_PER_USER)}`, sessionId: `session-${i}` });
const randomSession = () => sessionOf(Math.floor(Math.random() * SESSIONS));

/** The database options the service derives from its environment (DB_POOL_MAX and the defaults). */
function serviceDatabaseOptions(url: string) {
  const { database } = loadConfig({ DATABASE_URL: url, DB_POOL_MAX: process.env.DB_POOL_MAX });
  if (database.kind !== 'postgres') throw new Error('unreachable: DATABASE_URL is set');
  return database;
}

interface Bench {
  accountId: string;
  spaceId: string;
  secretId: string;
  base: string;
  headers: Record<string, string>;
}

interface RunResult {
  count: number;
  perSecond: number;
  p50: number;
  p99: number;
  non2xx: number;
  errors: number;
  statuses: Record<string, unknown>;
}

async function main(): Promise<void> {
  const { name, url, drop } = await createBenchDatabase();
  const setup = await openDatabase({ kind: 'postgres', url, poolMax: 4, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  let server: ChildProcess | undefined;
  let ceilingHandle: Awaited<ReturnType<typeof openDatabase>> | undefined;
  let keep = Boolean(process.env.BENCH_KEEP_DATABASE);
  try {
    await migrateToLatest(setup.db);
    const account = await createAccount(setup.db, 'bench');
    const port = await freePort();
    server = startServer(url, port, {
      env: { DB_POOL_MAX: String(POOL_MAX) },
      nodeArgs: process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [],
    });
    const bench: Bench = {
      accountId: account.accountId,
      spaceId: account.defaultSpaceId,
      secretId: account.rootCredential.secretId,
      base: `http://127.0.0.1:${port}`,
      headers: { authorization: `Bearer ${account.rootCredential.token}`, 'content-type': 'application/json' },
    };
    await waitReady(bench.base, server);
    await createSessions(bench);

    // The ceiling's pool is opened exactly as the service opens its own (size, timeouts, client).
    ceilingHandle = await openDatabase(serviceDatabaseOptions(url));
    const ceiling = ceilingHandle.pool;
    const captured = await captureStatements(setup, bench);
    const version = (await ceiling.query('SHOW server_version')).rows[0].server_version;
    console.log(`PostgreSQL ${version}, database ${name}; pool ${POOL_MAX} (service and ceiling), ${CONNECTIONS} concurrent clients, ${SESSIONS} sessions, ${DURATION_S} s per run after ${WARMUP_S} s of warm-up`);
    console.log(`one append request: the credential lookup, then a transaction of ${captured.transaction.length} statements (${captured.transaction.length + 1} round trips):`);
    for (const text of [...captured.authentication, ...captured.transaction]) console.log(`  ${text}`);
    assertSameStatements(captured.authentication, [CREDENTIAL_STATEMENT]);
    assertSameStatements(captured.transaction, TRANSACTION_STATEMENTS);

    const acknowledged: string[] = [];
    const committed: string[] = [];
    const rows: Record<string, string>[] = [];
    const ratios: { transaction: number[]; request: number[] } = { transaction: [], request: [] };
    for (let round = 1; round <= ROUNDS; round++) {
      const measure = async (run: string, once: (seconds: number, ids: string[]) => Promise<RunResult>) => {
        await once(WARMUP_S, []);
        const meter = await cpuMeter(ceiling, name, server!.pid!);
        const windowStart = process.hrtime.bigint() / 1000n; // µs of CLOCK_MONOTONIC, the clock of .cpuprofile timestamps
        const result = await once(DURATION_S, run === 'service' ? acknowledged : committed);
        const windowEnd = process.hrtime.bigint() / 1000n;
        const cpu = await meter(result.count);
        if (process.env.BENCH_CPU_PROF && run === 'service') console.log(`round ${round}: service run between ${windowStart} and ${windowEnd} µs (monotonic)`);
        rows.push({
          round: String(round),
          run,
          'per s': result.perSecond.toFixed(0),
          'p50 ms': result.p50.toFixed(1),
          'p99 ms': result.p99.toFixed(1),
          'non-2xx': run === 'service' ? String(result.non2xx + result.errors) : '-',
          'CPU ms: server': run === 'service' ? cpu.server : '-',
          postgres: cpu.postgres,
          'client/loadgen': cpu.bench,
          'server RSS MiB': rssOfProcess(server!.pid!).toFixed(1),
        });
        if (result.non2xx > 0 || result.errors > 0) console.log(`round ${round}: ${result.non2xx} non-2xx responses and ${result.errors} errors: ${JSON.stringify(result.statuses)}`);
        return result;
      };
      const service = await measure('service', (seconds, ids) => runService(bench, seconds, ids));
      const transaction = await measure('ceiling: transaction', (seconds, ids) => runCeiling(ceiling, bench, false, seconds, ids));
      const request = await measure('ceiling: lookup + transaction', (seconds, ids) => runCeiling(ceiling, bench, true, seconds, ids));
      ratios.transaction.push(service.perSecond / transaction.perSecond);
      ratios.request.push(service.perSecond / request.perSecond);
    }
    console.log('CPU columns: milliseconds of CPU per request (service) or per transaction (ceilings).');
    console.table(rows);
    console.log(
      `service/ceiling (median of ${ROUNDS}): ${median(ratios.transaction).toFixed(2)} against the transaction alone, ` +
        `${median(ratios.request).toFixed(2)} against credential lookup + transaction`,
    );

    const stored = new Set((await ceiling.query<{ event_id: string }>('SELECT event_id FROM events')).rows.map((row) => row.event_id));
    const missing = [...acknowledged, ...committed].filter((id) => !stored.has(id)).length;
    console.log(`verified: ${acknowledged.length} acknowledged appends and ${committed.length} committed ceiling transactions, ${missing} of them missing from the database`);
    console.log(`RSS after the run: server ${rssOfProcess(server.pid!).toFixed(1)} MiB, bench process ${rssMiB()} MiB`);
    if (missing > 0 || rows.some((row) => row['non-2xx'] !== '-' && row['non-2xx'] !== '0')) {
      process.exitCode = 1;
      keep = true;
    }
  } finally {
    await ceilingHandle?.close();
    if (server) await stopServer(server);
    await setup.close();
    if (keep) console.log(`kept database ${name} for inspection`);
    else await drop();
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

// ---------------------------------------------------------------------------------------------
// The service over HTTP

async function createSessions({ base, spaceId, headers }: Bench): Promise<void> {
  const create = async (userId: string, sessionId: string) => {
    const res = await fetch(`${base}/v1/spaces/${spaceId}/users/${userId}/sessions`, { method: 'POST', headers, body: JSON.stringify({ sessionId }) });
    if (res.status !== 201) throw new Error(`create session: ${res.status} ${await res.text()}`);
  };
  for (let start = 0; start < SESSIONS; start += 16) {
    const batch = Array.from({ length: Math.min(16, SESSIONS - start) }, (_, i) => sessionOf(start + i));
    await Promise.all(batch.map(({ userId, sessionId }) => create(userId, sessionId)));
  }
  await create('capture', 'capture');
}

let requestCounter = 0;

async function runService(bench: Bench, seconds: number, acknowledged: string[]): Promise<RunResult> {
  const result = await autocannon({
    url: bench.base,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: bench.headers,
        setupRequest: (request, context) => {
          const n = ++requestCounter;
          const eventId = `http-${RUN}-${n}`;
          (context as { eventId?: string }).eventId = eventId;
          const { userId, sessionId } = randomSession();
          return { ...request, path: `/v1/spaces/${bench.spaceId}/users/${userId}/sessions/${sessionId}/events`, body: eventBody(eventId, n) };
        },
        onResponse: (status, _body, context) => {
          if (status === 201) acknowledged.push((context as { eventId: string }).eventId);
        },
      },
    ],
  });
  return {
    count: result.requests.total,
    perSecond: result.requests.total / result.duration,
    p50: result.latency.p50,
    p99: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    statuses: result.statusCodeStats ?? {},
  };
}

// ---------------------------------------------------------------------------------------------
// The ceilings: what the service's statements cost without the service

/**
 * The statements of one append request with a one-key (session-scoped) stateDelta and a client
 * eventId, as the service issues them: checked at start against a captured request (see
 * captureStatements), and sent here with the same parameters.
 */
const CREDENTIAL_STATEMENT =
  'SELECT c.secret_id, c.account_id, c.principal_id, c.secret_hash, c.status, c.last_used_time, ' +
  '(SELECT kind FROM principals p WHERE p.account_id = c.account_id AND p.principal_id = c.principal_id) AS kind, ' +
  '(SELECT statements FROM policies p WHERE p.account_id = c.account_id AND p.principal_id = c.principal_id) AS statements ' +
  'FROM credentials c WHERE c.secret_id = $1';

const TRANSACTION_STATEMENTS = [
  'begin',
  "SELECT sessions.*, date_trunc('milliseconds', clock_timestamp()) AS now FROM sessions WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4 AND (expire_time IS NULL OR expire_time > now()) FOR UPDATE",
  'WITH existing AS ( SELECT FROM events WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4 AND event_id = ANY($5::text[]) LIMIT 1 ), ' +
    'inserted AS ( INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, invocation_id, author, content, actions, metadata, extensions, error_code, error_message, event_time, create_time, payload_hash) ' +
    'SELECT $6, $7, $8, $9, e.* FROM unnest($10::bigint[], $11::text[], $12::text[], $13::text[], $14::jsonb[], $15::jsonb[], $16::jsonb[], $17::jsonb[], $18::text[], $19::text[], $20::timestamptz[], $21::timestamptz[], $22::bytea[]) AS e ' +
    'WHERE NOT EXISTS (SELECT FROM existing) ), ' +
    'updated AS ( UPDATE sessions SET state = $23::jsonb, event_count = $24, revision = $25, update_time = $26 WHERE account_id = $27 AND space_id = $28 AND user_id = $29 AND session_id = $30 AND NOT EXISTS (SELECT FROM existing) ) ' +
    'SELECT EXISTS (SELECT FROM existing) AS replayed, space_users.state AS user_state, session_spaces.state AS app_state FROM session_spaces ' +
    'JOIN space_users ON space_users.account_id = session_spaces.account_id AND space_users.space_id = session_spaces.space_id ' +
    'WHERE session_spaces.account_id = $31 AND session_spaces.space_id = $32 AND space_users.user_id = $33',
  'commit',
];

async function appendTransaction(client: pg.PoolClient, bench: Bench, eventId: string, n: number): Promise<void> {
  const { userId, sessionId } = randomSession();
  const key = [bench.accountId, bench.spaceId, userId, sessionId];
  const [begin, lock, write, commit] = TRANSACTION_STATEMENTS as [string, string, string, string];
  await client.query(begin);
  try {
    const session = (await client.query(lock, key)).rows[0];
    const event = JSON.parse(eventBody(eventId, n));
    const seq = Number(session.event_count) + 1;
    const state = { ...session.state, ...event.actions.stateDelta };
    const columns = [[seq], [eventId], [null], [event.author], [JSON.stringify(event.content)], [JSON.stringify(event.actions)], [null], [null], [null], [null]];
    const times = [[session.now], [session.now]];
    const sessionChange = [JSON.stringify(state), seq, Number(session.revision) + 1, session.now];
    const written = await client.query(write, [
      ...key,
      [eventId],
      ...key,
      ...columns,
      ...times,
      [randomBytes(32)],
      ...sessionChange,
      ...key,
      bench.accountId,
      bench.spaceId,
      userId,
    ]);
    if (written.rows[0].replayed) throw new Error(`ceiling: ${eventId} was already stored`);
    await client.query(commit);
  } catch (error) {
    await client.query('rollback');
    throw error;
  }
}

/** CONNECTIONS workers, each running transactions back to back over the pool, for `seconds`. */
async function runCeiling(pool: pg.Pool, bench: Bench, withCredentialLookup: boolean, seconds: number, committed: string[]): Promise<RunResult> {
  const latencies: number[] = [];
  const started = performance.now();
  const deadline = started + seconds * 1000;
  const worker = async () => {
    while (performance.now() < deadline) {
      const n = ++requestCounter;
      const eventId = `direct-${RUN}-${n}`;
      const start = performance.now();
      // Like the service: the lookup takes any pooled connection, then the transaction takes one.
      if (withCredentialLookup) await pool.query(CREDENTIAL_STATEMENT, [bench.secretId]);
      const client = await pool.connect();
      try {
        await appendTransaction(client, bench, eventId, n);
      } finally {
        client.release();
      }
      latencies.push(performance.now() - start);
      committed.push(eventId);
    }
  };
  await Promise.all(Array.from({ length: CONNECTIONS }, worker));
  const elapsed = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  return { count: latencies.length, perSecond: latencies.length / elapsed, p50: percentile(latencies, 50), p99: percentile(latencies, 99), non2xx: 0, errors: 0, statuses: {} };
}

/**
 * Runs one request's database work through the service's own code with Kysely's query log on
 * (authenticate, then appendEvents), and answers the SQL each issued, so that the ceilings can be
 * checked against what the service really runs.
 */
async function captureStatements(setup: Awaited<ReturnType<typeof openDatabase>>, bench: Bench): Promise<{ authentication: string[]; transaction: string[] }> {
  let statements: string[] = [];
  const logged = new Kysely<DB>({
    dialect: new PostgresDialect({ pool: setup.pool }),
    log: (event) => {
      if (event.level === 'query') statements.push(event.query.sql.replace(/\s+/g, ' ').trim());
    },
  });
  await authenticate(logged, bench.headers.authorization);
  const authentication = statements;
  statements = [];
  const key = { accountId: bench.accountId, spaceId: bench.spaceId, userId: 'capture', sessionId: 'capture' };
  await appendEvents(logged, DEFAULT_LIMITS, key, JSON.parse(eventBody(`capture-${RUN}`, 0)), undefined);
  return { authentication, transaction: statements };
}

function assertSameStatements(captured: string[], expected: string[]): void {
  if (captured.length !== expected.length || captured.some((text, i) => text !== expected[i])) {
    throw new Error(`the ceiling's statements differ from the service's; update them to:\n${captured.join('\n')}`);
  }
}

// ---------------------------------------------------------------------------------------------
// Measuring processes

/** CPU seconds (user + system) a process has used so far; 0 once it has gone. */
function cpuSecondsOf(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

/**
 * Starts counting the CPU used by the server, by this process and by the PostgreSQL backends of
 * the bench database; the function it answers stops and gives milliseconds per request.
 */
async function cpuMeter(pool: pg.Pool, database: string, serverPid: number) {
  const backends = async () => (await pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = $1', [database])).rows.map((row) => row.pid);
  const sample = (pids: number[]) => {
    const self = process.cpuUsage();
    return { server: cpuSecondsOf(serverPid), bench: (self.user + self.system) / 1e6, postgres: new Map(pids.map((pid) => [pid, cpuSecondsOf(pid)])) };
  };
  const before = sample(await backends());
  return async (count: number) => {
    const pids = [...new Set([...before.postgres.keys(), ...(await backends())])];
    const after = sample(pids);
    let postgres = 0;
    // A backend that ended during the run (an idle pool connection closing) is left out.
    for (const pid of pids) if (existsSync(`/proc/${pid}`)) postgres += (after.postgres.get(pid) ?? 0) - (before.postgres.get(pid) ?? 0);
    const perRequest = (seconds: number) => ((seconds * 1000) / count).toFixed(2);
    return { server: perRequest(after.server - before.server), bench: perRequest(after.bench - before.bench), postgres: perRequest(postgres) };
  };
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
