// Soak (issue 5): the real server (a child process running src/server.ts) under a moderate mixed
// load for BENCH_SOAK_SECONDS: appends with a one-key stateDelta, context reads, describes, event
// lists and session lists with a metadata filter. Every BENCH_SOAK_SAMPLE_SECONDS it prints the
// server's RSS (VmRSS from /proc), the database connections of the bench database
// (pg_stat_activity) and, when the server has GET /metrics, its pool gauges and heap; then a
// summary: RSS first/last/max and growth, connections and pool min/max. Flat is the goal.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:soak
//
// Creates and drops its own database. Environment: BENCH_SOAK_SECONDS (default 300),
// BENCH_SOAK_RATE (requests per second, default 100), BENCH_SOAK_SAMPLE_SECONDS (default 15),
// BENCH_SOAK_SESSIONS (default 200), DB_POOL_MAX (the server's pool, default: the server's own).
import type { ChildProcess } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { freePort, rssOfProcess, scrapeMetrics, startServer, stopServer, waitReady } from './server-process.js';
import { createBenchDatabase, percentile, rssMiB } from './support.js';

const SECONDS = Number(process.env.BENCH_SOAK_SECONDS ?? 300);
const RATE = Number(process.env.BENCH_SOAK_RATE ?? 100);
const SAMPLE_SECONDS = Number(process.env.BENCH_SOAK_SAMPLE_SECONDS ?? 15);
const SESSIONS = Number(process.env.BENCH_SOAK_SESSIONS ?? 200);
const SESSIONS_PER_USER = 10;
/** Requests in flight at most: a server that stalls makes the load wait, not pile up without bound. */
const MAX_IN_FLIGHT = 64;

/** The mix, in shares of the requests (they add up to 100). */
const MIX = [
  ['append', 40],
  ['context', 30],
  ['describe', 15],
  ['list events', 10],
  ['list sessions', 5],
] as const;
type Kind = (typeof MIX)[number][0];

interface Sample {
  second: number;
  rssMiB: number;
  connections: number;
  pool?: { open: number; inUse: number; waiting: number };
  heapMiB?: number;
}

async function main(): Promise<void> {
  const { name, url, drop } = await createBenchDatabase();
  const setup = await openDatabase({ kind: 'postgres', url, poolMax: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  const monitor = new pg.Client({ connectionString: url });
  let server: ChildProcess | undefined;
  try {
    await migrateToLatest(setup.db);
    const account = await createAccount(setup.db, 'soak');
    const spaceId = account.defaultSpaceId;
    const port = await freePort();
    server = startServer(url, port);
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, server);
    const headers = { authorization: `Bearer ${account.rootCredential.token}`, 'content-type': 'application/json' };
    await createSessions(base, spaceId, headers);
    await monitor.connect();
    const hasMetrics = (await fetch(`${base}/metrics`)).ok;
    console.log(
      `database ${name}; server pid ${server.pid}; ${RATE} requests/s for ${SECONDS} s over ${SESSIONS} sessions ` +
        `(${MIX.map(([kind, share]) => `${share}% ${kind}`).join(', ')}); a sample every ${SAMPLE_SECONDS} s; /metrics ${hasMetrics ? 'found' : 'absent'}`,
    );

    const session = (i: number) => `/v1/spaces/${spaceId}/users/user-${Math.floor(i / SESSIONS_PER_USER)}/sessions/soak-${i}`;
    let counter = 0;
    const request = (kind: Kind): [string, RequestInit] => {
      const n = counter++;
      const path = session(n % SESSIONS);
      switch (kind) {
        case 'append':
          return [
            `${path}/events`,
            {
              method: 'POST',
              headers,
              body: JSON.stringify({
                author: n % 2 ? 'agent' : 'user',
                content: { role: n % 2 ? 'model' : 'user', parts: [{ text: `turn ${n}: the quick brown fox jumps over the lazy dog` }] },
                actions: { stateDelta: { turn: n } },
              }),
            },
          ];
        case 'context':
          return [`${path}/context`, { headers }];
        case 'describe':
          return [path, { headers }];
        case 'list events':
          return [`${path}/events?order=desc&pageSize=50`, { headers }];
        case 'list sessions':
          return [`/v1/spaces/${spaceId}/sessions?metadata=${encodeURIComponent(`example.com/agent-id=agent-${n % 10}`)}`, { headers }];
      }
    };
    const kinds: Kind[] = MIX.flatMap(([kind, share]) => Array<Kind>(share).fill(kind));

    let latencies: number[] = [];
    const byKind = new Map<Kind, number[]>(MIX.map(([kind]) => [kind, []]));
    const statuses = new Map<string, number>();
    let inFlight = 0;
    let skipped = 0;
    let sent = 0;
    const fire = async (kind: Kind) => {
      const [path, init] = request(kind);
      const start = performance.now();
      inFlight++;
      let status: string;
      try {
        const res = await fetch(base + path, init);
        await res.arrayBuffer();
        status = String(res.status);
      } catch (error) {
        status = `error ${(error as Error).message}`;
      } finally {
        inFlight--;
      }
      const elapsed = performance.now() - start;
      latencies.push(elapsed);
      byKind.get(kind)!.push(elapsed);
      const key = `${kind} ${status}`;
      statuses.set(key, (statuses.get(key) ?? 0) + 1);
    };

    const samples: Sample[] = [];
    const started = performance.now();
    const pacer = setInterval(() => {
      const due = Math.floor(((performance.now() - started) / 1000) * RATE);
      while (sent < due) {
        sent++;
        if (inFlight >= MAX_IN_FLIGHT) {
          skipped++;
          continue;
        }
        void fire(kinds[sent % kinds.length]!);
      }
    }, 5);
    try {
      for (let second = SAMPLE_SECONDS; second <= SECONDS; second += SAMPLE_SECONDS) {
        await sleep(started + second * 1000 - performance.now());
        const sample = await takeSample(second, server.pid!, monitor, name, hasMetrics ? base : undefined);
        samples.push(sample);
        const window = latencies.sort((a, b) => a - b);
        latencies = [];
        const pool = sample.pool ? ` pool open ${sample.pool.open} in use ${sample.pool.inUse} waiting ${sample.pool.waiting};` : '';
        const heap = sample.heapMiB !== undefined ? ` heap ${sample.heapMiB.toFixed(1)} MiB;` : '';
        console.log(
          `t=${String(second).padStart(4)} s  RSS ${sample.rssMiB.toFixed(1)} MiB;${heap} db connections ${sample.connections};${pool} ` +
            `${window.length} requests (${(window.length / SAMPLE_SECONDS).toFixed(0)}/s) p50 ${ms(percentile(window, 50))} p99 ${ms(percentile(window, 99))} ms`,
        );
      }
    } finally {
      clearInterval(pacer);
    }
    while (inFlight > 0) await sleep(10);

    const rss = samples.map((s) => s.rssMiB);
    const first = rss[0]!;
    const last = rss.at(-1)!;
    const connections = samples.map((s) => s.connections);
    console.log('\nsummary');
    console.log(`  server RSS MiB: first ${first.toFixed(1)}, last ${last.toFixed(1)}, min ${Math.min(...rss).toFixed(1)}, max ${Math.max(...rss).toFixed(1)}; growth first→last ${(((last - first) / first) * 100).toFixed(1)}%`);
    // The first samples include the warm-up (JIT, pools, caches filling): flat means flat after it.
    const secondHalf = rss.slice(Math.floor(rss.length / 2));
    const middle = secondHalf[0]!;
    console.log(
      `  server RSS MiB over the second half: min ${Math.min(...secondHalf).toFixed(1)}, max ${Math.max(...secondHalf).toFixed(1)}; growth middle→last ${(((last - middle) / middle) * 100).toFixed(1)}%`,
    );
    const heaps = samples.flatMap((s) => (s.heapMiB === undefined ? [] : [s.heapMiB]));
    if (heaps.length) console.log(`  heap used MiB: first ${heaps[0]!.toFixed(1)}, last ${heaps.at(-1)!.toFixed(1)}, max ${Math.max(...heaps).toFixed(1)}`);
    console.log(`  database connections (pg_stat_activity): min ${Math.min(...connections)}, max ${Math.max(...connections)}`);
    const pools = samples.flatMap((s) => (s.pool ? [s.pool] : []));
    if (pools.length) {
      const range = (values: number[]) => `min ${Math.min(...values)}, max ${Math.max(...values)}`;
      console.log(`  pool (/metrics): open ${range(pools.map((p) => p.open))}; in use ${range(pools.map((p) => p.inUse))}; waiting ${range(pools.map((p) => p.waiting))}`);
    }
    const total = [...statuses.values()].reduce((a, b) => a + b, 0);
    console.log(`  ${total} requests answered, ${skipped} not sent (${MAX_IN_FLIGHT} already in flight); by kind and status:`);
    for (const [key, count] of [...statuses].sort()) console.log(`    ${key}: ${count}`);
    console.log('  latency over the whole run, ms:');
    for (const [kind, values] of byKind) {
      values.sort((a, b) => a - b);
      console.log(`    ${kind}: p50 ${ms(percentile(values, 50))}, p99 ${ms(percentile(values, 99))}`);
    }
    console.log(`  bench process RSS ${rssMiB()} MiB`);
    if ([...statuses.keys()].some((key) => !/ 20[01]$/.test(key))) process.exitCode = 1;
  } finally {
    await monitor.end().catch(() => {});
    if (server) await stopServer(server);
    await setup.close();
    await drop();
  }
}

async function takeSample(second: number, pid: number, monitor: pg.Client, database: string, metricsBase: string | undefined): Promise<Sample> {
  const sample: Sample = {
    second,
    rssMiB: rssOfProcess(pid),
    connections: Number((await monitor.query('SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database])).rows[0].n),
  };
  if (metricsBase) {
    const gauge = await scrapeMetrics(metricsBase);
    const [open, inUse, waiting] = [gauge('db_pool_connections'), gauge('db_pool_connections_in_use'), gauge('db_pool_waiting_clients')];
    if (open !== undefined && inUse !== undefined && waiting !== undefined) sample.pool = { open, inUse, waiting };
    const heap = gauge('nodejs_heap_size_used_bytes');
    if (heap !== undefined) sample.heapMiB = heap / 1024 / 1024;
  }
  return sample;
}

async function createSessions(base: string, spaceId: string, headers: Record<string, string>): Promise<void> {
  for (let start = 0; start < SESSIONS; start += 16) {
    const batch = Array.from({ length: Math.min(16, SESSIONS - start) }, (_, k) => start + k);
    await Promise.all(
      batch.map(async (i) => {
        const body = { sessionId: `soak-${i}`, metadata: { 'example.com/agent-id': `agent-${i % 10}` } };
        const res = await fetch(`${base}/v1/spaces/${spaceId}/users/user-${Math.floor(i / SESSIONS_PER_USER)}/sessions`, { method: 'POST', headers, body: JSON.stringify(body) });
        if (res.status !== 201) throw new Error(`create session: ${res.status} ${await res.text()}`);
      }),
    );
  }
}

const sleep = (milliseconds: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, milliseconds)));
const ms = (value: number | undefined) => (value === undefined ? '-' : value.toFixed(2));

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
