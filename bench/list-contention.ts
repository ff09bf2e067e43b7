// Session lists against appends (issue 10): 100 concurrent lists of one user's sessions with two
// metadata filters and includeTotal, on a small space, while 32 clients append; each alone first.
// Prints list p50/p99 and append throughput/p50/p99 for: appends alone, lists alone, both together.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:lists
//
// Creates and drops its own database; the server is a child process (src/server.ts) with its
// default pool unless DB_POOL_MAX is set. Environment: BENCH_DURATION (seconds per phase, default
// 10), BENCH_LISTS (concurrent list clients, default 100), BENCH_APPENDERS (default 32),
// BENCH_SERVER_ENV (extra server variables as JSON, e.g. '{"LIST_CONCURRENCY":"4"}').
import { performance } from 'node:perf_hooks';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { cpuMeter } from './cpu-meter.js';
import { type HttpClient, keepAliveClient } from './http-client.js';
import { freePort, startServer, stopServer, waitReady } from './server-process.js';
import { createBenchDatabase, percentile } from './support.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const LISTERS = Number(process.env.BENCH_LISTS ?? 100);
const APPENDERS = Number(process.env.BENCH_APPENDERS ?? 32);
const USERS = 10;
const SESSIONS_PER_USER = 50;
const SERVER_ENV = JSON.parse(process.env.BENCH_SERVER_ENV ?? '{}') as Record<string, string>;

interface Stats {
  count: number;
  perSecond: number;
  p50: number;
  p99: number;
  failed: number;
}

const stats = (samples: number[], failed: number, seconds: number): Stats => {
  const sorted = [...samples].sort((a, b) => a - b);
  return { count: sorted.length, perSecond: sorted.length / seconds, p50: percentile(sorted, 50) ?? NaN, p99: percentile(sorted, 99) ?? NaN, failed };
};

/** `clients` loops, each sending `next()` requests one after another until `seconds` have passed. */
async function load(clients: HttpClient[], seconds: number, next: (n: number) => { method: string; path: string; body?: unknown; ok: number }): Promise<Stats> {
  const samples: number[] = [];
  let failed = 0;
  let n = 0;
  const end = performance.now() + seconds * 1000;
  await Promise.all(
    clients.map(async (client) => {
      while (performance.now() < end) {
        const request = next(++n);
        const start = performance.now();
        const answer = await client.request(request.method, request.path, request.body);
        if (answer.status === request.ok) samples.push(performance.now() - start);
        else if (++failed <= 3) console.log(`${request.method} ${request.path}: ${answer.status} ${answer.body.slice(0, 200)}`);
      }
    }),
  );
  return stats(samples, failed, seconds);
}

async function main(): Promise<void> {
  const { name, url, drop } = await createBenchDatabase();
  const setup = await openDatabase({ kind: 'postgres', url, poolMax: 4, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  let server: ReturnType<typeof startServer> | undefined;
  const clients: HttpClient[] = [];
  try {
    await migrateToLatest(setup.db);
    const account = await createAccount(setup.db, 'bench');
    const port = await freePort();
    server = startServer(url, port, { env: SERVER_ENV });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, server);
    const headers = { authorization: `Bearer ${account.rootCredential.token}` };
    const space = `/v1/spaces/${account.defaultSpaceId}`;
    const client = () => {
      const c = keepAliveClient(base, headers);
      clients.push(c);
      return c;
    };

    // A small space: 10 users × 50 sessions, metadata x ∈ {a, b}, y ∈ {c, d, e}.
    const seeders = Array.from({ length: 8 }, client);
    const sessions = Array.from({ length: USERS * SESSIONS_PER_USER }, (_, i) => ({
      userId: `user-${i % USERS}`,
      sessionId: `session-${i}`,
      metadata: { x: ['a', 'b'][i % 2]!, y: ['c', 'd', 'e'][i % 3]! },
    }));
    await Promise.all(
      seeders.map(async (seeder, k) => {
        for (let i = k; i < sessions.length; i += seeders.length) {
          const { userId, sessionId, metadata } = sessions[i]!;
          const res = await seeder.request('POST', `${space}/users/${userId}/sessions`, { sessionId, title: `t${i}`, metadata });
          if (res.status !== 201) throw new Error(`seed: ${res.status} ${res.body}`);
        }
      }),
    );

    const listers = Array.from({ length: LISTERS }, client);
    const appenders = Array.from({ length: APPENDERS }, client);
    const list = (n: number) => ({ method: 'GET', path: `${space}/users/user-${n % USERS}/sessions?metadata=x%3Da&metadata=y%3Dc&includeTotal=true`, ok: 200 });
    const append = (n: number) => {
      const { userId, sessionId } = sessions[Math.floor(Math.random() * sessions.length)]!;
      return { method: 'POST', path: `${space}/users/${userId}/sessions/${sessionId}/events`, body: { author: 'agent', content: { parts: [{ text: `turn ${n}` }] }, actions: { stateDelta: { n } } }, ok: 201 };
    };
    const sample = await listers[0]!.request('GET', list(0).path);
    const body = JSON.parse(sample.body) as { sessions: unknown[]; totalCount: number };
    console.log(`database ${name}; server env ${JSON.stringify(SERVER_ENV)}; ${sessions.length} sessions; a list answers ${body.sessions.length} of totalCount ${body.totalCount}`);
    console.log(`${LISTERS} list clients, ${APPENDERS} append clients, ${DURATION_S} s per phase (after 2 s of warm-up)`);

    await load(appenders, 2, append);
    await load(listers, 2, list);
    // CPU per request of the server process and of the database's backends, for each phase.
    const cpu: string[] = [];
    const measured = async <T extends Stats | Stats[]>(phase: string, run: () => Promise<T>): Promise<T> => {
      const meter = await cpuMeter(setup.pool, name, server!.pid!);
      const result = await run();
      const count = ([] as Stats[]).concat(result).reduce((sum, s) => sum + s.count, 0);
      const used = await meter(count);
      cpu.push(`  ${phase.padEnd(14)} server ${used.server.toFixed(2)} ms, postgres ${used.postgres.toFixed(2)} ms of CPU per request`);
      return result;
    };
    const appendsAlone = await measured('appends alone', () => load(appenders, DURATION_S, append));
    const listsAlone = await measured('lists alone', () => load(listers, DURATION_S, list));
    const [listsTogether, appendsTogether] = await measured('both together', () =>
      Promise.all([load(listers, DURATION_S, list), load(appenders, DURATION_S, append)]),
    );

    const row = (phase: string, s: Stats | undefined, a: Stats | undefined) => ({
      phase,
      'lists/s': s ? s.perSecond.toFixed(0) : '-',
      'list p50 ms': s ? s.p50.toFixed(1) : '-',
      'list p99 ms': s ? s.p99.toFixed(1) : '-',
      'appends/s': a ? a.perSecond.toFixed(0) : '-',
      'append p50 ms': a ? a.p50.toFixed(1) : '-',
      'append p99 ms': a ? a.p99.toFixed(1) : '-',
      failed: String((s?.failed ?? 0) + (a?.failed ?? 0)),
    });
    console.table([row('appends alone', undefined, appendsAlone), row('lists alone', listsAlone, undefined), row('both together', listsTogether, appendsTogether)]);
    console.log(cpu.join('\n'));
    if (listsAlone.failed + listsTogether.failed + appendsAlone.failed + appendsTogether.failed > 0) process.exitCode = 1;
  } finally {
    for (const c of clients) c.close();
    if (server) await stopServer(server);
    await setup.close();
    await drop();
  }
}

await main();
