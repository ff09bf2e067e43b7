// The embedded default (PGlite in DATA_DIR, DATABASE_URL unset), as `npm start` runs it for a new
// user: appends per second and sequential read latency of the real server process. With
// BENCH_COMPARE_ROOT set to another checkout (its src/ and node_modules), both servers run side by
// side and every measurement alternates between them, so "before" and "after" meet the same moments
// of a noisy machine:
//
//   BENCH_COMPARE_ROOT=/path/to/older/checkout npm run bench:embedded
//
// Per round and server: throughput of single-event appends (autocannon, 8 connections, over 100
// sessions; PGlite has one connection, so this measures the service's queue in front of it), then
// the sequential p50/p99 of a context read (newest 50 events + state of a 100-event session), a
// describe, and an append, interleaved between the servers. Every acknowledged append is counted
// afterwards (through the API's eventCount). Environment: BENCH_DURATION (seconds per
// throughput run, default 10), BENCH_WARMUP (seconds, default 3), BENCH_ROUNDS (default 3),
// BENCH_N (sequential requests per read kind and round, default 300).
import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type HttpClient, keepAliveClient } from './http-client.js';
import { freePort, rssOfProcess, startServer, stopServer, waitReady } from './server-process.js';
import { type Latency, timeInterleaved } from './support.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const N = Number(process.env.BENCH_N ?? 300);
const CONNECTIONS = 8;
const SESSIONS = 100;
const CONTEXT_EVENTS = 100;
const HERE = fileURLToPath(new URL('..', import.meta.url));

interface EmbeddedServer {
  label: string;
  process: ChildProcess;
  dataDir: string;
  base: string;
  spaceId: string;
  headers: Record<string, string>;
  client: HttpClient;
  acknowledged: number;
  /** Throughput runs: each may leave up to CONNECTIONS appends in flight when autocannon stops. */
  runs: number;
}

/** The account is created by the admin CLI of the same checkout, before its server holds the folder. */
function createAccount(root: string, dataDir: string): { defaultSpaceId: string; token: string } {
  const { DATABASE_URL: _unused, ...env } = process.env;
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/admin.ts', 'create-account', '--name', 'bench'], {
    cwd: root,
    env: { ...env, DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`create-account in ${root} failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as { defaultSpaceId: string; token: string };
}

async function startEmbedded(label: string, root: string): Promise<EmbeddedServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'ass-bench-embedded-'));
  const account = createAccount(root, dataDir);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startServer(undefined, port, { root, env: { DATA_DIR: dataDir } });
  await waitReady(base, child);
  const headers = { authorization: `Bearer ${account.token}` };
  const server: EmbeddedServer = { label, process: child, dataDir, base, spaceId: account.defaultSpaceId, headers, client: keepAliveClient(base, headers), acknowledged: 0, runs: 0 };
  for (let i = 0; i < SESSIONS; i++) await expect(server, 'POST', `${userPath(server, i)}`, { sessionId: sessionOf(i).sessionId }, 201);
  for (let k = 0; k < CONTEXT_EVENTS / 10; k++) {
    await expect(server, 'POST', `${sessionPath(server, 0)}/events`, { events: Array.from({ length: 10 }, (_, j) => event(k * 10 + j)) }, 201);
    server.acknowledged += 10;
  }
  return server;
}

const sessionOf = (i: number) => ({ userId: `user-${i % 10}`, sessionId: `session-${i}` });
const userPath = (server: EmbeddedServer, i: number) => `/v1/spaces/${server.spaceId}/users/${sessionOf(i).userId}/sessions`;
const sessionPath = (server: EmbeddedServer, i: number) => `${userPath(server, i)}/${sessionOf(i).sessionId}`;
const event = (n: number) => ({
  author: 'agent',
  content: { role: 'model', parts: [{ text: `turn ${n}: the quick brown fox jumps over the lazy dog` }] },
  actions: { stateDelta: { counter: n } },
});

async function expect(server: EmbeddedServer, method: string, path: string, body: unknown, status: number): Promise<string> {
  const answer = await server.client.request(method, path, body);
  if (answer.status !== status) throw new Error(`${server.label}: ${method} ${path} answered ${answer.status}: ${answer.body}`);
  return answer.body;
}

async function appendThroughput(server: EmbeddedServer, seconds: number): Promise<{ perSecond: number; failed: number }> {
  let n = 0;
  server.runs += 1;
  const result = await autocannon({
    url: server.base,
    connections: CONNECTIONS,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { ...server.headers, 'content-type': 'application/json' },
        setupRequest: (request) => ({ ...request, path: `${sessionPath(server, 1 + (n % (SESSIONS - 1)))}/events`, body: JSON.stringify(event(n++)) }),
        onResponse: (status) => {
          if (status === 201) server.acknowledged += 1;
        },
      },
    ],
  });
  return { perSecond: result.requests.total / result.duration, failed: result.non2xx + result.errors };
}

/** Events stored in all sessions, read back through the API (the listing's totals). */
async function storedEvents(server: EmbeddedServer): Promise<number> {
  let total = 0;
  for (let i = 0; i < SESSIONS; i++) {
    const described = JSON.parse(await expect(server, 'GET', sessionPath(server, i), undefined, 200)) as { eventCount?: number; lastSeq?: number };
    total += described.eventCount ?? described.lastSeq ?? 0;
  }
  return total;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const ms = (latency: Latency) => `${latency.p50.toFixed(2)} / ${latency.p99.toFixed(2)}`;

async function main(): Promise<void> {
  const roots = [{ label: 'this checkout', root: HERE }];
  if (process.env.BENCH_COMPARE_ROOT) roots.push({ label: `compare (${process.env.BENCH_COMPARE_ROOT})`, root: process.env.BENCH_COMPARE_ROOT });
  const servers: EmbeddedServer[] = [];
  try {
    for (const { label, root } of roots) servers.push(await startEmbedded(label, root));
    console.log(`embedded PGlite, ${servers.length} server(s) side by side; ${ROUNDS} round(s) of ${DURATION_S} s appends (${CONNECTIONS} connections) + ${N} sequential reads each`);
    // A checkout from before issue 20 loses its PGlite session after 10 s without traffic (the pool's
    // idle timeout), which the other server's throughput run would give it: one describe a second,
    // on every server alike, keeps each one's connection in use.
    const keepWarm = setInterval(() => {
      for (const server of servers) void fetch(`${server.base}${sessionPath(server, 0)}`, { headers: server.headers }).catch(() => undefined);
    }, 1_000);
    const rows: Record<string, string>[] = [];
    const figures = servers.map(() => ({ appends: [] as number[], context: [] as number[], describe: [] as number[], append: [] as number[] }));
    for (let round = 1; round <= ROUNDS; round++) {
      // Alternate which server goes first, so neither always meets the same part of a round.
      const order = round % 2 === 1 ? servers.map((_, i) => i) : servers.map((_, i) => servers.length - 1 - i);
      for (const i of order) {
        const server = servers[i]!;
        if (WARMUP_S > 0) await appendThroughput(server, WARMUP_S);
        const { perSecond, failed } = await appendThroughput(server, DURATION_S);
        figures[i]!.appends.push(perSecond);
        rows.push({ round: String(round), server: server.label, 'appends/s': perSecond.toFixed(0), failed: String(failed), 'RSS MiB': rssOfProcess(server.process.pid!).toFixed(0) });
      }
      let sequence = 0;
      const context = await timeInterleaved(N, servers.map((s) => () => expect(s, 'GET', `${sessionPath(s, 0)}/context?maxEvents=50`, undefined, 200).then(() => undefined)), 30);
      const describe = await timeInterleaved(N, servers.map((s) => () => expect(s, 'GET', sessionPath(s, 0), undefined, 200).then(() => undefined)), 30);
      const append = await timeInterleaved(
        N,
        servers.map((s) => async () => {
          await expect(s, 'POST', `${sessionPath(s, 1 + (sequence++ % (SESSIONS - 1)))}/events`, event(sequence), 201);
          s.acknowledged += 1;
        }),
        30,
      );
      servers.forEach((server, i) => {
        figures[i]!.context.push(context[i]!.p50);
        figures[i]!.describe.push(describe[i]!.p50);
        figures[i]!.append.push(append[i]!.p50);
        rows.push({ round: String(round), server: server.label, 'context p50/p99 ms': ms(context[i]!), 'describe p50/p99 ms': ms(describe[i]!), 'append p50/p99 ms': ms(append[i]!) });
      });
    }
    clearInterval(keepWarm);
    console.table(rows);
    console.log(`\nsummary (median of ${ROUNDS} rounds)`);
    servers.forEach((server, i) => {
      const f = figures[i]!;
      console.log(
        `  ${server.label}: ${median(f.appends).toFixed(0)} appends/s; sequential p50: context ${median(f.context).toFixed(2)} ms, describe ${median(f.describe).toFixed(2)} ms, append ${median(f.append).toFixed(2)} ms`,
      );
    });
    if (servers.length === 2) {
      const [a, b] = figures;
      console.log(
        `  this ÷ compare: appends/s ${(median(a!.appends) / median(b!.appends)).toFixed(2)}, context p50 ${(median(a!.context) / median(b!.context)).toFixed(2)}, ` +
          `describe p50 ${(median(a!.describe) / median(b!.describe)).toFixed(2)}, append p50 ${(median(a!.append) / median(b!.append)).toFixed(2)}`,
      );
    }
    for (const server of servers) {
      const stored = await storedEvents(server);
      // Stored may exceed acknowledged by the appends autocannon left in flight when it stopped (their
      // answers are not counted), never the other way round.
      const inFlight = stored - server.acknowledged;
      const verdict = inFlight >= 0 && inFlight <= server.runs * CONNECTIONS ? 'every acknowledged append stored' : '← MISMATCH';
      console.log(`  ${server.label}: ${server.acknowledged} appends acknowledged, ${stored} events stored (${inFlight} in flight at a run's end): ${verdict}`);
    }
  } finally {
    for (const server of servers) {
      server.client.close();
      await stopServer(server.process);
      rmSync(server.dataDir, { recursive: true, force: true });
    }
  }
}

await main();
