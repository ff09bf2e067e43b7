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
import { CONNECTIONS, type EmbeddedServer, HERE, SESSIONS, appendThroughput, event, expect, sessionPath, startEmbedded, stopEmbedded, storedEvents } from './embedded-server.js';
import { rssOfProcess } from './server-process.js';
import { type Latency, timeInterleaved } from './support.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const N = Number(process.env.BENCH_N ?? 300);

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
      const verdict = inFlight >= 0 && inFlight <= server.inFlightAtMost ? 'every acknowledged append stored' : '← MISMATCH';
      console.log(`  ${server.label}: ${server.acknowledged} appends acknowledged, ${stored} events stored (${inFlight} in flight at a run's end): ${verdict}`);
    }
  } finally {
    for (const server of servers) await stopEmbedded(server);
  }
}

await main();
