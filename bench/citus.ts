// The service on Citus beside the service on one PostgreSQL, in one run (docs/scale-out.md §4): the
// same server (src/server.ts, a child process, default settings) on a database of the single-node
// server (BENCH_DATABASE_URL) and on the coordinator of a private Citus cluster (a coordinator and
// two workers on this machine, test/support/private-citus.ts; migrated, then distribute.sql), each
// loaded the same way over HTTP with autocannon:
//   - append: one event with a one-key stateDelta per request, 32 connections over 256 sessions of
//     8 accounts (bench:append's run 1, smaller), with the default group commit and with
//     APPEND_BATCH_MAX=1 (each append alone: on Citus one delegated append_events call);
//   - read: GET …/context?maxEvents=50 of sessions holding 50 events each (bench:read's context
//     case) and GET …/sessions/{id} (its describe case), 8 connections.
// One machine holds every node, so the figures are the cost per call of the distributed path
// (coordinator → worker, two-phase commit where it applies), not scale. Printed: requests/s and
// latency per target, and the ratios Citus ÷ PostgreSQL and batched ÷ unbatched.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:citus
//
// Environment: BENCH_DURATION (seconds per measured run, default 10), BENCH_WARMUP (default 3).
// Needs Citus (../shared/citus/build.sh) and root or the postgres user for the private cluster.
import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { type CreatedAccount, createAccount } from '../src/modules/accounts/accounts.service.js';
import { startPrivateCitus } from '../test/support/private-citus.js';
import { freePort, startServer, stopServer, waitReady } from './server-process.js';
import { createBenchDatabase } from './support.js';

const DURATION_S = Number(process.env.BENCH_DURATION ?? 10);
const WARMUP_S = Number(process.env.BENCH_WARMUP ?? 3);
const ACCOUNTS = 8;
const SESSIONS_PER_ACCOUNT = 32;
const READ_EVENTS = 50;
const DISTRIBUTE_SQL = fileURLToPath(new URL('../deploy/citus/distribute.sql', import.meta.url));

interface Target {
  name: 'PostgreSQL' | 'Citus';
  url: string;
}

interface Fixture {
  accounts: CreatedAccount[];
  /** Paths of sessions (…/users/u/sessions/s), by account index. */
  sessions: string[][];
}

interface Figure {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Accounts with their sessions (some with READ_EVENTS events for the reads), through the API of a server on `url`. */
async function seed(base: string, url: string): Promise<Fixture> {
  const handle = await openDatabase({ kind: 'postgres', url, poolMax: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  const accounts: CreatedAccount[] = [];
  try {
    for (let a = 0; a < ACCOUNTS; a++) accounts.push(await createAccount(handle.db, `bench-${a}`));
  } finally {
    await handle.close();
  }
  const sessions: string[][] = [];
  for (const account of accounts) {
    const headers = { authorization: `Bearer ${account.rootCredential.token}`, 'content-type': 'application/json' };
    const paths: string[] = [];
    for (let s = 0; s < SESSIONS_PER_ACCOUNT; s++) {
      const users = `/v1/spaces/${account.defaultSpaceId}/users/u${s % 4}/sessions`;
      const created = await fetch(`${base}${users}`, { method: 'POST', headers, body: JSON.stringify({ sessionId: `s${s}` }) });
      if (created.status !== 201) throw new Error(`session create answered ${created.status}: ${await created.text()}`);
      paths.push(`${users}/s${s}`);
    }
    // The first session of each account is the read target: READ_EVENTS events, in batches.
    for (let i = 0; i < READ_EVENTS; i += 10) {
      const events = Array.from({ length: 10 }, (_, k) => ({ author: 'user', content: { parts: [{ text: `turn ${i + k} ${'x'.repeat(200)}` }] }, actions: { stateDelta: { turn: i + k } } }));
      const appended = await fetch(`${base}${paths[0]}/events`, { method: 'POST', headers, body: JSON.stringify({ events }) });
      if (appended.status !== 201) throw new Error(`append answered ${appended.status}: ${await appended.text()}`);
    }
    sessions.push(paths);
  }
  return { accounts, sessions };
}

/** autocannon with each connection on one account's token, cycling through `paths` of that account. */
async function load(base: string, fixture: Fixture, connections: number, request: (path: string) => { method: 'GET' | 'POST'; path: string; body?: string }, paths: (account: number) => string[], seconds: number): Promise<Figure> {
  const perConnection = Array.from({ length: connections }, (_, c) => {
    const account = c % fixture.accounts.length;
    return { token: fixture.accounts[account]!.rootCredential.token, paths: paths(account), next: Math.floor(c / fixture.accounts.length) };
  });
  const result = await autocannon({
    url: base,
    connections,
    duration: seconds,
    requests: [
      {
        setupRequest: (req, context) => {
          // autocannon gives each connection a context of its own: the first request numbers it.
          const own = context as { id?: number };
          own.id ??= nextClient++ % connections;
          const mine = perConnection[own.id]!;
          const path = mine.paths[mine.next++ % mine.paths.length]!;
          const { method, path: url, body } = request(path);
          return { ...req, method, path: url, body, headers: { authorization: `Bearer ${mine.token}`, 'content-type': 'application/json' } };
        },
      },
    ],
    initialContext: {},
  } as autocannon.Options);
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.non2xx + result.errors + result.timeouts };
}
let nextClient = 0;

const appendRequest = (path: string) => ({ method: 'POST' as const, path: `${path}/events`, body: JSON.stringify({ author: 'user', actions: { stateDelta: { n: 1 } } }) });
const contextRequest = (path: string) => ({ method: 'GET' as const, path: `${path}/context?maxEvents=${READ_EVENTS}` });
const describeRequest = (path: string) => ({ method: 'GET' as const, path });

async function measureTarget(target: Target): Promise<Record<string, Figure>> {
  const figures: Record<string, Figure> = {};
  let fixture: Fixture | undefined;
  for (const batching of ['batched', 'unbatched'] as const) {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const server: ChildProcess = startServer(target.url, port, { env: { LOG_LEVEL: 'error', ...(batching === 'unbatched' ? { APPEND_BATCH_MAX: '1' } : {}) } });
    try {
      await waitReady(base, server);
      fixture ??= await seed(base, target.url);
      const all = (account: number) => fixture!.sessions[account]!;
      await load(base, fixture, 32, appendRequest, all, WARMUP_S);
      figures[`append (${batching})`] = await load(base, fixture, 32, appendRequest, all, DURATION_S);
      if (batching === 'batched') {
        const readTargets = (account: number) => [fixture!.sessions[account]![0]!];
        await load(base, fixture, 8, contextRequest, readTargets, WARMUP_S);
        figures['read: context'] = await load(base, fixture, 8, contextRequest, readTargets, DURATION_S);
        figures['read: describe'] = await load(base, fixture, 8, describeRequest, all, DURATION_S);
      }
    } finally {
      await stopServer(server);
    }
    console.log(`  ${target.name}, ${batching}: done`);
  }
  return figures;
}

async function main(): Promise<void> {
  console.log(`bench:citus — ${DURATION_S} s per run after ${WARMUP_S} s of warm-up; ${ACCOUNTS} accounts × ${SESSIONS_PER_ACCOUNT} sessions`);
  const single = await createBenchDatabase();
  // fsync on, like the single-node server: the same durability on both sides.
  const citus = await startPrivateCitus({ settings: { fsync: 'on', shared_buffers: '128MB' } });
  try {
    await citus.createDatabase('bench');
    for (const url of [single.url, citus.coordinator.url('bench')]) {
      const handle = await openDatabase({ kind: 'postgres', url, poolMax: 1, statementTimeoutMs: 120_000, connectTimeoutMs: 10_000 });
      await migrateToLatest(handle.db);
      await handle.close();
    }
    await citus.psqlFile('bench', DISTRIBUTE_SQL);
    const results: Record<string, Record<string, Figure>> = {};
    for (const target of [{ name: 'PostgreSQL', url: single.url }, { name: 'Citus', url: citus.coordinator.url('bench') }] as Target[]) {
      results[target.name] = await measureTarget(target);
    }
    const rows = Object.keys(results.PostgreSQL!);
    const pad = (text: string, width: number) => text.padEnd(width);
    const show = (f: Figure) => `${f.rps.toFixed(0).padStart(6)} req/s  p50 ${String(f.p50).padStart(4)} ms  p99 ${String(f.p99).padStart(4)} ms${f.errors ? `  ${f.errors} errors` : ''}`;
    console.log('');
    console.log(`${pad('load', 20)}${pad('PostgreSQL', 42)}${pad('Citus', 42)}Citus ÷ PostgreSQL (req/s)`);
    for (const row of rows) {
      const pgFigure = results.PostgreSQL![row]!;
      const citusFigure = results.Citus![row]!;
      console.log(`${pad(row, 20)}${pad(show(pgFigure), 42)}${pad(show(citusFigure), 42)}${(citusFigure.rps / pgFigure.rps).toFixed(2)}`);
    }
    for (const name of ['PostgreSQL', 'Citus'] as const) {
      const ratio = results[name]!['append (batched)']!.rps / results[name]!['append (unbatched)']!.rps;
      console.log(`${name}: append batched ÷ unbatched (APPEND_BATCH_MAX=1) = ${ratio.toFixed(2)}`);
    }
  } finally {
    await citus.remove();
    await single.drop();
  }
}

await main();
