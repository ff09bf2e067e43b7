// Noisy neighbours (issue 21): can one tenant, inside its rate limit, stall another or crash the
// instance? One real server (a child process) on PostgreSQL; account B runs a light agent loop
// (append then context, a turn every 100 ms on each of 4 sessions) first alone, then beside each of
// issue 21's attacks by account A, one after another:
//   1. API 3.0 DescribeEvents with Offset 1e12 and Limit 1, 12 at a time, on a session of 300 events of ~200 kB;
//   2. GET …/state-at/20000 on a session with a ~1 MB state, 8 at a time;
//   3. appends whose stateDelta has 5,000 keys over a ~900 kB state, on two sessions at once;
//   4. 1,000 event streams opened on one session while it gets 5 appends a second;
//   5. 64 appenders, each on its own session, in a space whose state is ~1 MB (every append answers it);
//   6. session lists with pageSize 100 of a space whose 100 sessions each hold a ~1 MB state, 4 at a time.
// It prints B's quiet p50/p99, B's p50/p99 under each attack (and as a multiple of quiet), B's
// failed turns, A's answers by status, the server's peak RSS growth during the attack and whether it
// is still alive, with PASS/FAIL against the targets (B's p99 ≤ 5× quiet and ≤ 300 ms, no failed
// turn, RSS growth ≤ 300 MB, alive). Exits with 1 when any attack fails them.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:neighbours
//
// A runs in a child process of its own (this file with NEIGHBOURS_ATTACK set), so that its sockets
// do not share B's event loop. A keeps to the default rate limit (1,200 requests a minute per
// credential) by pacing itself over NEIGHBOURS_A_CREDENTIALS credentials; the server runs with the
// rate limit off, as every bench does, so that the limit's own bookkeeping is not measured.
// Only 127.0.0.1; every phase is bounded in time; the database is created and dropped.
// Environment: BENCH_NEIGHBOURS_SECONDS (per attack, default 20), BENCH_NEIGHBOURS_QUIET_SECONDS
// (default 15), BENCH_NEIGHBOURS_ATTACKS (comma-separated numbers, default 1,2,3,4,5,6),
// BENCH_NEIGHBOURS_HISTORY (events of the state-at session, default 20,000), BENCH_SERVER_ROOT (run
// the server of another checkout, e.g. main's, with this bench), BENCH_CPU_PROF (a directory: the
// server writes a .cpuprofile of the whole run there when it exits), BENCH_NEIGHBOURS_EMBEDDED=1 (the
// server on the embedded database, as the quick start runs it: a fresh DATA_DIR whose one PGlite
// connection every account shares; its PostgreSQL CPU is inside the server's).
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { tc3CanonicalRequest, tc3Date, tc3Signature, tc3StringToSign } from '../src/lib/tc3-signature.js';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cpuSecondsOf } from './cpu-meter.js';
import { freePort, rssOfProcess, startServer, stopServer, waitReady } from './server-process.js';
import { createBenchDatabase, percentile } from './support.js';

const ATTACK_SECONDS = Number(process.env.BENCH_NEIGHBOURS_SECONDS ?? 20);
const QUIET_SECONDS = Number(process.env.BENCH_NEIGHBOURS_QUIET_SECONDS ?? 15);
const EMBEDDED = process.env.BENCH_NEIGHBOURS_EMBEDDED === '1';
const ATTACKS = (process.env.BENCH_NEIGHBOURS_ATTACKS ?? '1,2,3,4,5,6').split(',').map(Number);
const HISTORY = Number(process.env.BENCH_NEIGHBOURS_HISTORY ?? 20_000);
/** Attack 6's states as words (compressed 2–3 × as stored) instead of a repeated seed (a hundredfold). */
const LARGE_STATES_AS_PROSE = process.env.BENCH_NEIGHBOURS_STATES === 'prose';
const A_CREDENTIALS = 5;
/** The default RATE_LIMIT_MAX per credential per minute, as requests per second. */
const A_RATE_PER_CREDENTIAL = 1200 / 60;
const B_SESSIONS = 4;
const B_TURN_MS = 100;
const TARGET = { p99Ratio: 5, p99Ms: 300, rssMiB: 300 };
/** Attack 4 opens its streams before B is measured beside them, within this. */
const OPEN_STREAMS_SECONDS = 30;
/** The attacker's line that says B may start (attack 4: its streams are open). */
const READY = 'ready';

const ATTACK_NAMES: Record<number, string> = {
  1: 'DescribeEvents Offset 1e12, 12 at a time',
  2: 'state-at/20000 of a 1 MB state, 8 at a time',
  3: '5,000-key deltas over 900 kB, 2 sessions',
  4: '1,000 streams on one session, 5 appends/s',
  5: '64 appenders in a space with a 1 MB state',
  6: 'session lists, pageSize 100, of 1 MB states, 4 at a time',
};
/** Attack 5's sessions (one per appender, each of its own user) and attack 6's. */
const HEAVY_APPENDERS = 64;
const LARGE_STATE_SESSIONS = 100;

/** What the attacker child needs: where, as whom, and which sessions were seeded for it. */
interface AttackPlan {
  attack: number;
  seconds: number;
  base: string;
  spaceId: string;
  /** A's bearer tokens, `<secretId>.<secretKey>`: the API 3.0 attack signs with the same credentials. */
  tokens: string[];
  /** Attack 5's space (its state is 1 MB) and attack 6's (its sessions' states are). */
  heavySpaceId?: string | undefined;
  largeStatesSpaceId?: string | undefined;
}

interface AttackReport {
  statuses: Record<string, number>;
  streamsOpen?: number;
}

const json = { 'content-type': 'application/json' };
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const sessionPath = (spaceId: string, sessionId: string) => `/v1/spaces/${spaceId}/users/a/sessions/${sessionId}`;
const text = (bytes: number, seed: string) => seed.repeat(Math.ceil(bytes / seed.length)).slice(0, bytes);

/**
 * Text of `bytes` characters as words drawn from a vocabulary of 2,000 (a generator seeded by
 * `seed`): PostgreSQL compresses it about as much as prose (2–3 ×), where `text` repeats a
 * seed that it compresses a hundredfold.
 */
function prose(bytes: number, seed: number): string {
  let state = seed * 2_654_435_761 + 1;
  const next = () => (state = (state * 1_103_515_245 + 12_345) % 2_147_483_648);
  const vocabulary = Array.from({ length: 2_000 }, (_, i) => {
    let word = '';
    for (let letter = 0; letter < 3 + (i % 7); letter++) word += String.fromCharCode(97 + (next() % 26));
    return word;
  });
  const words: string[] = [];
  let length = 0;
  while (length < bytes) {
    const word = vocabulary[next() % vocabulary.length]!;
    words.push(word);
    length += word.length + 1;
  }
  return words.join(' ').slice(0, bytes);
}

// ---------------------------------------------------------------- the attacker (child process)

async function runAttack(plan: AttackPlan): Promise<AttackReport> {
  const statuses: Record<string, number> = {};
  const count = (status: string) => (statuses[status] = (statuses[status] ?? 0) + 1);
  const until = performance.now() + plan.seconds * 1000;
  // Within the rate limit: every credential at most A_RATE_PER_CREDENTIAL requests a second.
  let nextSlot = performance.now();
  let turn = 0;
  const paced = async (): Promise<string> => {
    const wait = nextSlot - performance.now();
    nextSlot = Math.max(nextSlot, performance.now()) + 1000 / (A_RATE_PER_CREDENTIAL * plan.tokens.length);
    if (wait > 0) await sleep(wait);
    return plan.tokens[turn++ % plan.tokens.length]!;
  };
  const send = async (path: string, init: RequestInit = {}) => {
    const token = await paced();
    try {
      const res = await fetch(plan.base + path, { ...init, headers: { ...json, ...(init.headers as Record<string, string>), authorization: `Bearer ${token}` } });
      await res.arrayBuffer();
      count(String(res.status));
    } catch (error) {
      count(`error ${(error as Error).message}`);
    }
  };
  const workers = (n: number, work: () => Promise<void>) =>
    Promise.all(Array.from({ length: n }, async () => {
      while (performance.now() < until) await work();
    }));

  switch (plan.attack) {
    case 1: {
      let offset = 1e12;
      await workers(12, async () => {
        const [secretId, secretKey] = (await paced()).split('.') as [string, string];
        // A new Offset each time: the same signed body twice in a second would be a replay.
        const body = JSON.stringify({ SpaceId: plan.spaceId, UserId: 'a', SessionId: 'big-events', Offset: offset++, Limit: 1 });
        try {
          const res = await fetch(`${plan.base}/`, { method: 'POST', headers: tc3Headers(plan.base, { secretId, secretKey }, 'DescribeEvents', body), body });
          const answer = (await res.json()) as { Response?: { Error?: { Code: string } } };
          count(answer.Response?.Error?.Code ?? String(res.status));
        } catch (error) {
          count(`error ${(error as Error).message}`);
        }
      });
      return { statuses };
    }
    case 2:
      await workers(8, () => send(`${sessionPath(plan.spaceId, 'long-history')}/state-at/${HISTORY}`));
      return { statuses };
    case 3: {
      let n = 0;
      await Promise.all(
        ['wide-1', 'wide-2'].map((sessionId) =>
          workers(1, () => {
            const stateDelta = Object.fromEntries(Array.from({ length: 5_000 }, (_, k) => [`a${k}`, n++ % 10]));
            return send(`${sessionPath(plan.spaceId, sessionId)}/events`, { method: 'POST', body: JSON.stringify({ author: 'a', actions: { stateDelta } }) });
          }),
        ),
      );
      return { statuses };
    }
    case 4: {
      // The streams are opened first (at most OPEN_STREAMS_SECONDS), then B is measured while they
      // are open and the session gets its appends.
      const streams: http.ClientRequest[] = [];
      let open = 0;
      let answered = 0;
      for (let i = 0; i < 1_000; i++) {
        const token = await paced();
        streams.push(openStream(`${plan.base}${sessionPath(plan.spaceId, 'streamed')}/events/stream`, token, (status) => {
          count(`stream ${status}`);
          answered++;
          if (status === 200) open++;
        }));
      }
      const openedBy = performance.now() + OPEN_STREAMS_SECONDS * 1000;
      while (answered < streams.length && performance.now() < openedBy) await sleep(100);
      process.stdout.write(`${READY}\n`);
      const until = performance.now() + plan.seconds * 1000;
      let k = 0;
      while (performance.now() < until) {
        const started = performance.now();
        void send(`${sessionPath(plan.spaceId, 'streamed')}/events`, { method: 'POST', body: JSON.stringify({ author: 'a', content: { role: 'model', parts: [{ text: `tick ${k++}` }] } }) });
        await sleep(Math.max(0, 200 - (performance.now() - started)));
      }
      const report = { statuses, streamsOpen: open };
      streams.forEach((stream) => stream.destroy());
      return report;
    }
    case 5: {
      let n = 0;
      let next = 0;
      await workers(HEAVY_APPENDERS, () => {
        const user = next++ % HEAVY_APPENDERS;
        return send(`/v1/spaces/${plan.heavySpaceId}/users/u${user}/sessions/s/events`, { method: 'POST', body: JSON.stringify({ author: 'a', actions: { stateDelta: { n: n++ } } }) });
      });
      return { statuses };
    }
    case 6:
      await workers(4, () => send(`/v1/spaces/${plan.largeStatesSpaceId}/sessions?pageSize=100`));
      return { statuses };
    default:
      throw new Error(`no attack ${plan.attack}`);
  }
}

function tc3Headers(base: string, credential: { secretId: string; secretKey: string }, action: string, body: string): Record<string, string> {
  const timestamp = Math.floor(Date.now() / 1000);
  const date = tc3Date(timestamp);
  const host = new URL(base).host;
  const headers = { 'content-type': 'application/json', host };
  const canonical = tc3CanonicalRequest({ method: 'POST', path: '/', query: '', headers, signedHeaders: ['content-type', 'host'], payload: Buffer.from(body) });
  const signature = tc3Signature(credential.secretKey, date, 'ags', tc3StringToSign(timestamp, date, 'ags', canonical));
  return {
    'content-type': 'application/json',
    authorization: `TC3-HMAC-SHA256 Credential=${credential.secretId}/${date}/ags/tc3_request, SignedHeaders=content-type;host, Signature=${signature}`,
    'x-tc-action': action,
    'x-tc-version': '2025-09-20',
    'x-tc-timestamp': String(timestamp),
  };
}

/** An event stream whose frames are read and dropped, as a client that follows it would. */
function openStream(url: string, token: string, onStatus: (status: number | string) => void): http.ClientRequest {
  const request = http.get(url, { headers: { authorization: `Bearer ${token}`, accept: 'text/event-stream' } }, (response) => {
    onStatus(response.statusCode ?? 0);
    response.on('data', () => {});
    response.on('error', () => {});
  });
  request.on('error', (error) => {
    if (!request.destroyed || !('code' in error && error.code === 'ECONNRESET')) onStatus(`error ${error.message}`);
  });
  return request;
}

// ---------------------------------------------------------------- the bench (parent process)

interface Phase {
  name: string;
  turns: number[];
  /** B's appends and context reads apart: which half of a slow turn waited. */
  appends: number[];
  reads: number[];
  failed: number;
  failures: Record<string, number>;
  rssStart: number;
  rssPeak: number;
  alive: boolean;
  attack?: AttackReport;
  /** The server's event-loop delay over the phase (ms, prom-client's, reset by each scrape of /metrics). */
  loopLag?: { p99: number; max: number };
  /** CPU seconds the phase cost: the server process, the database's backends, and A's process. */
  cpu: { server: number; postgres: number; attacker: number; seconds: number };
}

async function main(): Promise<void> {
  const masterKey = randomBytes(32);
  const { name, url, drop } = await benchDatabase();
  const setup = await openDatabase(
    url === undefined
      ? { kind: 'pglite', dataDir: name, statementTimeoutMs: 120_000 }
      : { kind: 'postgres', url, poolMax: 2, statementTimeoutMs: 120_000, connectTimeoutMs: 10_000 },
  );
  let server: ChildProcess | undefined;
  try {
    await migrateToLatest(setup.db);
    const a = await createAccount(setup.db, 'tenant-a', { masterKey });
    const b = await createAccount(setup.db, 'tenant-b', { masterKey });
    await setup.close();
    const port = await freePort();
    server = startServer(url, port, {
      env: { CREDENTIAL_MASTER_KEY: masterKey.toString('base64'), ...(url === undefined ? { DATA_DIR: name } : {}) },
      nodeArgs: process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [],
    });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, server);
    const aHeaders = { ...json, authorization: `Bearer ${a.rootCredential.token}` };
    const bHeaders = { ...json, authorization: `Bearer ${b.rootCredential.token}` };
    const call = async (headers: Record<string, string>, method: string, path: string, body?: unknown) => {
      const res = await fetch(base + path, { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
      const answer = await res.text();
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${answer.slice(0, 300)}`);
      return answer ? (JSON.parse(answer) as Record<string, unknown>) : {};
    };
    const tokens = [a.rootCredential.token];
    while (tokens.length < A_CREDENTIALS) tokens.push((await call(aHeaders, 'POST', '/v1/iam/credentials', {})).token as string);

    console.log(`${url === undefined ? 'embedded database in' : 'database'} ${name}; server pid ${server.pid}${process.env.BENCH_SERVER_ROOT ? ` (code of ${process.env.BENCH_SERVER_ROOT})` : ''}; seeding…`);
    const seedStart = performance.now();
    const aSpace = a.defaultSpaceId;
    const newSession = (headers: Record<string, string>, spaceId: string, userId: string, sessionId: string) =>
      call(headers, 'POST', `/v1/spaces/${spaceId}/users/${userId}/sessions`, { sessionId });
    const appendTo = (sessionId: string, events: unknown[]) => call(aHeaders, 'POST', `${sessionPath(aSpace, sessionId)}/events`, { events });
    /** ~60 kB per delta: a state of `deltas` × 60 kB, in as many appends. */
    const bigState = async (sessionId: string, deltas: number) => {
      for (let i = 0; i < deltas; i++) await appendTo(sessionId, [{ author: 'seed', actions: { stateDelta: { [`big${i}`]: text(60_000, `${i}abcdefghij`) } } }]);
    };
    if (ATTACKS.includes(1)) {
      await newSession(aHeaders, aSpace, 'a', 'big-events');
      for (let i = 0; i < 300; i += 4) {
        await appendTo('big-events', Array.from({ length: 4 }, (_, k) => ({ author: 'seed', content: { role: 'model', parts: [{ text: text(200_000, `event ${i + k} `) }] } })));
      }
    }
    if (ATTACKS.includes(2)) {
      await newSession(aHeaders, aSpace, 'a', 'long-history');
      await bigState('long-history', 16);
      for (let seq = 16; seq < HISTORY; seq += 100) {
        await appendTo('long-history', Array.from({ length: Math.min(100, HISTORY - seq) }, (_, k) => ({ author: 'seed', content: { role: 'model', parts: [{ text: `turn ${seq + k}` }] }, actions: { stateDelta: { turn: seq + k } } })));
      }
    }
    if (ATTACKS.includes(3)) {
      for (const sessionId of ['wide-1', 'wide-2']) {
        await newSession(aHeaders, aSpace, 'a', sessionId);
        await bigState(sessionId, 15);
      }
    }
    if (ATTACKS.includes(4)) await newSession(aHeaders, aSpace, 'a', 'streamed');
    let heavySpaceId: string | undefined;
    if (ATTACKS.includes(5)) {
      heavySpaceId = (await call(aHeaders, 'POST', '/v1/spaces', { name: 'state of 1 MB' })).spaceId as string;
      for (let i = 0; i < HEAVY_APPENDERS; i++) await newSession(aHeaders, heavySpaceId, `u${i}`, 's');
      for (let i = 0; i < 16; i++) {
        await call(aHeaders, 'POST', `/v1/spaces/${heavySpaceId}/users/u0/sessions/s/events`, { author: 'seed', actions: { stateDelta: { [`app:big${i}`]: text(60_000, `${i}abcdefghij`) } } });
      }
    }
    let largeStatesSpaceId: string | undefined;
    if (ATTACKS.includes(6)) {
      largeStatesSpaceId = (await call(aHeaders, 'POST', '/v1/spaces', { name: 'sessions of 1 MB states' })).spaceId as string;
      for (let i = 0; i < LARGE_STATE_SESSIONS; i++) {
        await call(aHeaders, 'POST', `/v1/spaces/${largeStatesSpaceId}/users/u${i % 10}/sessions`, { sessionId: `s${i}`, state: { notes: LARGE_STATES_AS_PROSE ? prose(1_000_000, i) : text(1_000_000, `${i}abcdefghij`) } });
      }
    }
    const bSessions: string[] = [];
    for (let i = 0; i < B_SESSIONS; i++) {
      await newSession(bHeaders, b.defaultSpaceId, `agent-${i}`, `turns-${i}`);
      bSessions.push(`/v1/spaces/${b.defaultSpaceId}/users/agent-${i}/sessions/turns-${i}`);
    }
    console.log(`seeded in ${((performance.now() - seedStart) / 1000).toFixed(0)} s; quiet ${QUIET_SECONDS} s, then each attack ${ATTACK_SECONDS} s`);

    const pid = server.pid!;
    const phase = async (name: string, seconds: number, attack?: number): Promise<Phase> => {
      const result: Phase = { name, turns: [], appends: [], reads: [], failed: 0, failures: {}, rssStart: rssOfProcess(pid), rssPeak: 0, alive: true, cpu: { server: 0, postgres: 0, attacker: 0, seconds: 0 } };
      result.rssPeak = result.rssStart;
      const sampler = setInterval(() => {
        try {
          result.rssPeak = Math.max(result.rssPeak, rssOfProcess(pid));
        } catch {
          // the server is gone: `alive` says so
        }
      }, 200);
      const attacker = attack === undefined ? undefined : startAttacker({ attack, seconds, base, spaceId: aSpace, tokens, heavySpaceId, largeStatesSpaceId });
      await attacker?.ready;
      await eventLoopLag(base); // the lag is measured from here
      const cpuBefore = { server: cpuSecondsOf(pid), postgres: postgresCpuSeconds(), attacker: attacker ? cpuSecondsOf(attacker.pid) : 0, at: performance.now() };
      const until = performance.now() + seconds * 1000;
      let n = 0;
      await Promise.all(
        bSessions.map(async (session) => {
          while (performance.now() < until) {
            const started = performance.now();
            try {
              const appended = await fetch(`${base}${session}/events`, {
                method: 'POST',
                headers: bHeaders,
                body: JSON.stringify({ author: 'user', content: { role: 'user', parts: [{ text: `turn ${n}` }] }, actions: { stateDelta: { turn: n++ } } }),
              });
              await appended.arrayBuffer();
              const appendedAt = performance.now();
              const context = await fetch(`${base}${session}/context`, { headers: bHeaders });
              await context.arrayBuffer();
              if (appended.ok && context.ok) {
                result.turns.push(performance.now() - started);
                result.appends.push(appendedAt - started);
                result.reads.push(performance.now() - appendedAt);
              }
              else fail(result, `${appended.status}/${context.status}`);
            } catch (error) {
              fail(result, `error ${(error as Error).message}`);
            }
            await sleep(Math.max(0, B_TURN_MS - (performance.now() - started)));
          }
        }),
      );
      result.cpu = {
        server: cpuSecondsOf(pid) - cpuBefore.server,
        postgres: postgresCpuSince(cpuBefore.postgres),
        attacker: attacker ? cpuSecondsOf(attacker.pid) - cpuBefore.attacker : 0,
        seconds: (performance.now() - cpuBefore.at) / 1000,
      };
      result.loopLag = await eventLoopLag(base);
      if (attacker) result.attack = await attacker.report;
      clearInterval(sampler);
      result.alive = server!.exitCode === null && (await fetch(`${base}/healthz`).then((res) => res.ok, () => false));
      return result;
    };

    const quiet = await phase('quiet', QUIET_SECONDS);
    const phases: Phase[] = [];
    printHeader();
    printRow(quiet, quiet);
    for (const attack of ATTACKS) {
      const result = await phase(`${attack}. ${ATTACK_NAMES[attack]}`, ATTACK_SECONDS, attack);
      phases.push(result);
      printRow(result, quiet);
      if (!result.alive) break;
      // What the attack left in the server (statements running up to their timeout, closing
      // streams) must not be counted against the next one: wait until B's turns are quiet again.
      await settle(base, bSessions[0]!, bHeaders, stats(quiet.turns).p50);
    }
    process.exitCode = phases.some((result) => !passes(result, quiet)) || phases.length < ATTACKS.length ? 1 : 0;
    console.log(`\ntargets: B's p99 ≤ ${TARGET.p99Ratio}× quiet p99 and ≤ ${TARGET.p99Ms} ms, 0 failed turns, RSS growth ≤ ${TARGET.rssMiB} MB, instance alive`);
    for (const result of [quiet, ...phases]) {
      if (result.failed) console.log(`${result.name}: B's failures ${JSON.stringify(result.failures)}`);
      if (result.attack) console.log(`${result.name}: A's answers ${JSON.stringify(result.attack.statuses)}${result.attack.streamsOpen === undefined ? '' : `; streams opened ${result.attack.streamsOpen}`}`);
    }
  } finally {
    if (server) await stopServer(server);
    await drop();
  }
}

/** A PostgreSQL database of its own, or with BENCH_NEIGHBOURS_EMBEDDED a fresh data folder (url undefined). */
async function benchDatabase(): Promise<{ name: string; url: string | undefined; drop(): Promise<void> }> {
  if (!EMBEDDED) return createBenchDatabase();
  const dataDir = mkdtempSync(join(tmpdir(), 'ass-neighbours-'));
  return { name: dataDir, url: undefined, drop: async () => rmSync(dataDir, { recursive: true, force: true }) };
}

/** Waits (at most 30 s) until three turns of B in a row take no more than twice the quiet median. */
async function settle(base: string, session: string, headers: Record<string, string>, quietP50: number): Promise<void> {
  const until = performance.now() + 30_000;
  for (let calm = 0; calm < 3 && performance.now() < until; ) {
    const started = performance.now();
    await fetch(`${base}${session}/context`, { headers }).then((res) => res.arrayBuffer(), () => undefined);
    calm = performance.now() - started <= 2 * quietP50 ? calm + 1 : 0;
    await sleep(B_TURN_MS);
  }
}

function fail(phase: Phase, why: string): void {
  phase.failed++;
  phase.failures[why] = (phase.failures[why] ?? 0) + 1;
}

/**
 * CPU seconds used so far by each process named postgres on this machine: the backends of both
 * accounts' requests and the cluster's own writers (WAL, checkpoints), which a big state's rewrite
 * keeps busy too. A backend that exits within a phase is not counted.
 */
function postgresCpuSeconds(): Map<number, number> {
  const seconds = new Map<number, number>();
  if (EMBEDDED) return seconds; // the embedded database runs inside the server's process
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') seconds.set(Number(pid), cpuSecondsOf(Number(pid)));
    } catch {
      // gone meanwhile
    }
  }
  return seconds;
}

/** The CPU seconds the postgres processes used between two readings (a process started since counts whole). */
function postgresCpuSince(before: Map<number, number>): number {
  let seconds = 0;
  for (const [pid, now] of postgresCpuSeconds()) seconds += now - (before.get(pid) ?? 0);
  return seconds;
}

function startAttacker(plan: AttackPlan): { pid: number; ready: Promise<void>; report: Promise<AttackReport> } {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url)], {
    env: { ...process.env, NEIGHBOURS_ATTACK: JSON.stringify(plan) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString('utf8');
    if (output.split('\n').includes(READY)) markReady();
  });
  if (plan.attack !== 4) markReady();
  // A stuck attacker is ended: every phase is bounded in time.
  const deadline = setTimeout(() => child.kill('SIGKILL'), (plan.seconds + OPEN_STREAMS_SECONDS + 30) * 1000);
  const report = new Promise<AttackReport>((resolve) => {
    child.on('exit', () => {
      clearTimeout(deadline);
      markReady();
      const last = output.trim().split('\n').at(-1) ?? '';
      try {
        resolve(JSON.parse(last) as AttackReport);
      } catch {
        resolve({ statuses: { 'attacker ended without a report': 1 } });
      }
    });
  });
  return { pid: child.pid!, ready, report };
}

const stats = (turns: number[]) => {
  const sorted = [...turns].sort((x, y) => x - y);
  return sorted.length ? { p50: percentile(sorted, 50), p99: percentile(sorted, 99) } : { p50: Number.NaN, p99: Number.NaN };
};

/** The server's event-loop delay since the last scrape (prom-client resets its histogram on each). */
async function eventLoopLag(base: string): Promise<{ p99: number; max: number } | undefined> {
  try {
    const text = await (await fetch(`${base}/metrics`)).text();
    const seconds = (name: string) => Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1]);
    return { p99: 1000 * seconds('nodejs_eventloop_lag_p99_seconds'), max: 1000 * seconds('nodejs_eventloop_lag_max_seconds') };
  } catch {
    return undefined;
  }
}

function passes(result: Phase, quiet: Phase): boolean {
  const { p99 } = stats(result.turns);
  return p99 <= TARGET.p99Ratio * stats(quiet.turns).p99 && p99 <= TARGET.p99Ms && result.failed === 0 && result.rssPeak - result.rssStart <= TARGET.rssMiB && result.alive;
}

function printHeader(): void {
  console.log('\n| phase | B turns | B p50 ms | B p99 ms | p50 ÷ quiet | p99 ÷ quiet | B failed | RSS start MB | RSS peak growth MB | alive | verdict | CPU % server / PostgreSQL / A | CPU ms per A request server / PostgreSQL | B p99 ms append / context | server loop delay ms p99 / max |');
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
}

function printRow(result: Phase, quiet: Phase): void {
  const own = stats(result.turns);
  const base = stats(quiet.turns);
  const isQuiet = result === quiet;
  console.log(
    `| ${result.name} | ${result.turns.length} | ${own.p50.toFixed(0)} | ${own.p99.toFixed(0)} | ${isQuiet ? '1' : (own.p50 / base.p50).toFixed(1)} | ${isQuiet ? '1' : (own.p99 / base.p99).toFixed(1)} | ` +
      `${result.failed} | ${result.rssStart.toFixed(0)} | ${(result.rssPeak - result.rssStart).toFixed(0)} | ${result.alive ? 'yes' : 'NO'} | ${isQuiet ? '' : passes(result, quiet) ? 'PASS' : 'FAIL'} | ${cpuShares(result)} | ${cpuPerRequest(result)} | ` +
      `${stats(result.appends).p99.toFixed(0)} / ${stats(result.reads).p99.toFixed(0)} | ${result.loopLag ? `${result.loopLag.p99.toFixed(0)} / ${result.loopLag.max.toFixed(0)}` : 'unknown'} |`,
  );
}

/** Each process's CPU over the phase, as a share of one core. */
function cpuShares({ cpu }: Phase): string {
  const share = (seconds: number) => `${((100 * seconds) / cpu.seconds).toFixed(0)}`;
  return `${share(cpu.server)} / ${share(cpu.postgres)} / ${share(cpu.attacker)}`;
}

/** The server's and PostgreSQL's CPU over the phase per request of A's (B's share included). */
function cpuPerRequest({ cpu, attack }: Phase): string {
  const requests = Object.values(attack?.statuses ?? {}).reduce((sum, n) => sum + n, 0);
  return requests ? `${((1000 * cpu.server) / requests).toFixed(1)} / ${((1000 * cpu.postgres) / requests).toFixed(1)}` : '';
}

if (process.env.NEIGHBOURS_ATTACK) {
  runAttack(JSON.parse(process.env.NEIGHBOURS_ATTACK) as AttackPlan).then(
    // Exits once the report is written: the attack's sockets and timers need not be waited for.
    (report) => process.stdout.write(`${JSON.stringify(report)}\n`, () => process.exit(0)),
    (error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    },
  );
} else {
  main().catch((error: unknown) => {
    console.error(error);
    process.exitCode = 1;
  });
}
