// Two versions of the server's append side by side (issue 24): this checkout and BENCH_COMPARE_ROOT
// (another checkout: its src/ and node_modules), each a child process on the same PostgreSQL
// database, loaded in turn by the same autocannon runs, so that "before" and "after" meet the same
// moments of a noisy machine. What one round of bench:append cannot show, a change of a few
// percent in the server's CPU per append, shows here as the median of the rounds' ratios.
//
//   BENCH_COMPARE_ROOT=/path/to/other/checkout npm run bench:append-compare
//
// Per round and server, in alternating order: single-event appends, then batches of 10 events, each
// run BENCH_DURATION seconds (default 8) after BENCH_WARMUP (default 2), 32 connections
// (BENCH_CONNECTIONS) over 1,000 sessions (BENCH_SESSIONS); BENCH_ROUNDS (default 4). Printed per
// run: requests/s, the server's and PostgreSQL's CPU per request; then per kind the medians and the
// median of compare ÷ this, and whether every acknowledged event is in the database. Without
// BENCH_COMPARE_ROOT it measures this checkout alone. Both checkouts must have the same migrations.
// BENCH_COMPARE_NODE_ARGS (space-separated Node flags, e.g. `--max-semi-space-size=32`) starts the
// compare server with them: BENCH_COMPARE_ROOT may then be this checkout, to measure a flag alone.
// BENCH_COMPARE_ENV (space-separated NAME=value, e.g. `LOG_LEVEL=info`) does the same for the compare
// server's environment: a setting measured alone.
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import autocannon from 'autocannon';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { cpuMeter } from './cpu-meter.js';
import { HERE } from './embedded-server.js';
import { freePort, startServer, stopServer, waitReady } from './server-process.js';
import { createBenchDatabase } from './support.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 8);
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1_000);
const KINDS = { single: 1, batch: 10 } as const;
type Kind = keyof typeof KINDS;
const RUN = randomBytes(3).toString('hex');

interface Contestant {
  label: string;
  process: ChildProcess;
  base: string;
  figures: Record<Kind, { perSecond: number[]; server: number[]; postgres: number[] }>;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
};
const sessionPath = (spaceId: string, i: number) => `/v1/spaces/${spaceId}/users/user-${Math.floor(i / 10)}/sessions/session-${i}`;

async function main(): Promise<void> {
  const { name, url, drop } = await createBenchDatabase();
  const setup = await openDatabase({ kind: 'postgres', url, poolMax: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  const contestants: Contestant[] = [];
  let keep = false;
  try {
    await migrateToLatest(setup.db);
    const account = await createAccount(setup.db, 'bench');
    const headers = { authorization: `Bearer ${account.rootCredential.token}`, 'content-type': 'application/json' };
    const spaceId = account.defaultSpaceId;
    const roots = [{ label: 'this checkout', root: HERE }];
    if (process.env.BENCH_COMPARE_ROOT) roots.push({ label: 'compare', root: process.env.BENCH_COMPARE_ROOT });
    const compareNodeArgs = (process.env.BENCH_COMPARE_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const compareEnv = Object.fromEntries(
      (process.env.BENCH_COMPARE_ENV ?? '')
        .split(' ')
        .filter(Boolean)
        .map((setting) => [setting.slice(0, setting.indexOf('=')), setting.slice(setting.indexOf('=') + 1)]),
    );
    for (const { label, root } of roots) {
      const port = await freePort();
      const compare = label === 'compare';
      const child = startServer(url, port, { root, nodeArgs: compare ? compareNodeArgs : [], env: compare ? compareEnv : {}, compiled: compare ? process.env.BENCH_COMPARE_COMPILED === '1' : undefined });
      const base = `http://127.0.0.1:${port}`;
      await waitReady(base, child);
      const empty = () => ({ perSecond: [], server: [], postgres: [] });
      contestants.push({ label, process: child, base, figures: { single: empty(), batch: empty() } });
    }
    for (let start = 0; start < SESSIONS; start += 16) {
      await Promise.all(
        Array.from({ length: Math.min(16, SESSIONS - start) }, async (_, k) => {
          const i = start + k;
          const res = await fetch(`${contestants[0]!.base}/v1/spaces/${spaceId}/users/user-${Math.floor(i / 10)}/sessions`, { method: 'POST', headers, body: JSON.stringify({ sessionId: `session-${i}` }) });
          if (res.status !== 201) throw new Error(`create session: ${res.status} ${await res.text()}`);
        }),
      );
    }
    console.log(`${contestants.map((c) => c.label).join(' and ')}: ${ROUNDS} rounds, ${DURATION_S} s runs after ${WARMUP_S} s, ${CONNECTIONS} connections, ${SESSIONS} sessions, database ${name}`);
    if (process.env.BENCH_COMPARE_ROOT) console.log(`compare = ${process.env.BENCH_COMPARE_ROOT}${compareNodeArgs.length > 0 ? ` with node ${compareNodeArgs.join(" ")}` : ""}${process.env.BENCH_COMPARE_ENV ? ` and ${process.env.BENCH_COMPARE_ENV}` : ""}`);

    const acknowledged: string[] = [];
    let counter = 0;
    let failed = 0;
    const load = async (contestant: Contestant, kind: Kind, seconds: number) => {
      const size = KINDS[kind];
      const result = await autocannon({
        url: contestant.base,
        connections: CONNECTIONS,
        duration: seconds,
        requests: [
          {
            method: 'POST',
            headers,
            setupRequest: (request, context) => {
              const n = ++counter;
              const events = Array.from({ length: size }, (_, k) => ({
                eventId: `${RUN}-${n}-${k}`,
                author: 'agent',
                content: { role: 'model', parts: [{ text: `turn ${n}: the quick brown fox jumps over the lazy dog` }] },
                actions: { stateDelta: { counter: n } },
              }));
              (context as { ids?: string[] }).ids = events.map((e) => e.eventId);
              const body = size === 1 ? events[0] : { events };
              return { ...request, path: `${sessionPath(spaceId, Math.floor(Math.random() * SESSIONS))}/events`, body: JSON.stringify(body) };
            },
            onResponse: (status, _body, context) => {
              if (status === 201) acknowledged.push(...(context as { ids: string[] }).ids);
            },
          },
        ],
      });
      failed += result.non2xx + result.errors;
      return result;
    };

    const rows: Record<string, string>[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const order = round % 2 === 1 ? contestants : [...contestants].reverse();
      for (const kind of Object.keys(KINDS) as Kind[]) {
        for (const contestant of order) {
          if (WARMUP_S > 0) await load(contestant, kind, WARMUP_S);
          const meter = await cpuMeter(setup.pool, name, contestant.process.pid!);
          const result = await load(contestant, kind, DURATION_S);
          const used = await meter(result.requests.total);
          const figures = contestant.figures[kind];
          figures.perSecond.push(result.requests.total / result.duration);
          figures.server.push(used.server);
          figures.postgres.push(used.postgres);
          rows.push({
            round: String(round),
            kind,
            server: contestant.label,
            'requests/s': (result.requests.total / result.duration).toFixed(0),
            'server CPU ms/request': used.server.toFixed(3),
            'PostgreSQL CPU ms/request': used.postgres.toFixed(3),
            'non-2xx': String(result.non2xx + result.errors),
          });
        }
      }
    }
    console.table(rows);
    console.log('\nmedians over the rounds (per request; a batch request carries 10 events)');
    for (const kind of Object.keys(KINDS) as Kind[]) {
      for (const contestant of contestants) {
        const f = contestant.figures[kind];
        console.log(`  ${kind.padEnd(6)} ${contestant.label.padEnd(14)} ${median(f.perSecond).toFixed(0).padStart(6)}/s  server ${median(f.server).toFixed(3)} ms  PostgreSQL ${median(f.postgres).toFixed(3)} ms`);
      }
      if (contestants.length === 2) {
        const [a, b] = contestants.map((c) => c.figures[kind]);
        const ratios = (key: 'perSecond' | 'server' | 'postgres') => a![key].map((value, i) => b![key][i]! / value);
        const show = (key: 'perSecond' | 'server' | 'postgres') => `${median(ratios(key)).toFixed(3)} (rounds ${ratios(key).map((r) => r.toFixed(2)).join(' ')})`;
        console.log(`  ${kind.padEnd(6)} compare ÷ this: requests/s ${show('perSecond')}; server CPU ${show('server')}; PostgreSQL CPU ${show('postgres')}`);
      }
    }
    const stored = new Set((await setup.pool.query<{ event_id: string }>('SELECT event_id FROM events')).rows.map((row) => row.event_id));
    const missing = acknowledged.filter((id) => !stored.has(id)).length;
    console.log(`  non-2xx or failed: ${failed}; verified: ${acknowledged.length} acknowledged events, ${missing} missing from the database`);
    if (failed > 0 || missing > 0) {
      process.exitCode = 1;
      keep = true;
    }
  } finally {
    for (const contestant of contestants) await stopServer(contestant.process);
    await setup.close();
    if (keep) console.log(`kept database ${name} for inspection`);
    else await drop();
  }
}

await main();
