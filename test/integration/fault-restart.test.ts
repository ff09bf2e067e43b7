// The database dies mid-load (`pg_ctl stop -m immediate`) and comes back. The service runs as a
// real process against a private cluster this file creates (never the machine's shared server):
// the process must stay up, answer fast 503s during the outage, report not-ready, recover, and
// keep every append it acknowledged. Clients retry with the same eventId, as the API tells them to.
import { type AddressInfo, type Socket, createServer } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { openDatabase } from '../../src/db/connect.js';
import { issueCredential } from '../../src/modules/accounts/credentials.js';
import { type PrivateCluster, createPrivateCluster, findPostgresBinaries } from '../support/private-cluster.js';
import { type ServiceProcess, freePort, killServiceProcess, sleep, startServiceProcess, waitUntilReady } from '../support/service-process.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

const CONNECT_TIMEOUT_MS = 1_000;
const STATEMENT_TIMEOUT_MS = 3_000;
// A request during the outage must answer within the connect timeout plus this margin.
const FAIL_FAST_MARGIN_MS = 1_500;
const READY_WITHIN_MS = 5_000;
const LOOPS = 16;
const SESSIONS = 8;
const RETRY_PAUSE_MS = 50;

// The restart case makes its own cluster and needs no test backend; it runs in the PostgreSQL run
// of the suite (where initdb is at hand) and is skipped in the PGlite run to keep that run short.
const backend = inject('testBackend');
const skipReason =
  backend.kind !== 'postgres' ? 'runs in the PostgreSQL run of the suite only' : findPostgresBinaries() ? undefined : 'initdb/pg_ctl not found';

interface Attempt {
  eventId: string;
  start: number;
  end: number;
  status: number | 'network-error';
  code?: string;
  retryAfter?: string | null;
}

interface Acknowledged {
  eventId: string;
  loop: number;
  n: number;
  sessionId: string;
  key: string;
  seq: number;
  status: number;
  attempts: number;
}

describe.skipIf(skipReason !== undefined)(`database restart mid-load${skipReason ? ` (skipped: ${skipReason})` : ''}`, () => {
  let cluster: PrivateCluster;
  let service: ServiceProcess | undefined;
  const token = issueCredential().token;

  beforeAll(async () => {
    cluster = await createPrivateCluster();
    await cluster.start();
    const port = await freePort();
    service = startServiceProcess({
      DATABASE_URL: cluster.url(),
      ROOT_API_KEY: token,
      PORT: String(port),
      DB_POOL_MAX: '10',
      DB_CONNECT_TIMEOUT_MS: String(CONNECT_TIMEOUT_MS),
      DB_STATEMENT_TIMEOUT_MS: String(STATEMENT_TIMEOUT_MS),
      RATE_LIMIT_MAX: '0',
      // The sweeper runs through the outage too: its failures must not take the process down.
      SWEEP_INTERVAL_MS: '200',
      LOG_LEVEL: 'error',
    });
    await waitUntilReady(service);
  });
  afterAll(async () => {
    killServiceProcess(service);
    await service?.exited;
    await cluster?.remove();
  });

  it('service connections carry the timeouts that keep an outage from hanging a request', async () => {
    const handle = await openDatabase({ kind: 'postgres', url: cluster.url(), poolMax: 1, statementTimeoutMs: 4_321, connectTimeoutMs: 1_000 });
    try {
      const client = await handle.pool.connect();
      try {
        const show = async (name: string) => (await client.query<{ v: string }>(`SELECT current_setting('${name}') AS v`)).rows[0]!.v;
        expect(await show('statement_timeout')).toBe('4321ms');
        expect(await show('idle_in_transaction_session_timeout')).toBe('4321ms');
        expect(await show('application_name')).toBe('agent-session-service');
        // pg's client-side read timeout (a backstop behind statement_timeout) and TCP keepalive:
        // no server setting shows these, pg's own connection parameters do.
        const internals = client as unknown as { connectionParameters: { query_timeout: number }; connection: { _keepAlive: boolean } };
        expect(internals.connectionParameters.query_timeout).toBeGreaterThan(4_321);
        expect(internals.connection._keepAlive).toBe(true);
      } finally {
        client.release();
      }
    } finally {
      await handle.close();
    }
  });

  it('stays up, fails fast with 503 during the outage, recovers, and keeps every acknowledged append', { timeout: 60_000 }, async () => {
    const running = service!;
    const base = running.baseUrl;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };

    const space = await fetch(`${base}/v1/spaces`, { method: 'POST', headers, body: JSON.stringify({ name: 'fault-restart' }) });
    expect(space.status).toBe(201);
    const { spaceId } = (await space.json()) as { spaceId: string };
    const sessionIds = Array.from({ length: SESSIONS }, (_, i) => `s${i}`);
    for (const sessionId of sessionIds) {
      const res = await fetch(`${base}/v1/spaces/${spaceId}/users/u1/sessions`, { method: 'POST', headers, body: JSON.stringify({ sessionId }) });
      expect(res.status).toBe(201);
    }

    const attempts: Attempt[] = [];
    const ledger: Acknowledged[] = [];
    let stopLoad = false;

    // One client: appends its own events, each retried with the same eventId and body until a 2xx.
    const client = async (loop: number) => {
      const sessionId = sessionIds[loop % SESSIONS]!;
      const url = `${base}/v1/spaces/${spaceId}/users/u1/sessions/${sessionId}/events`;
      for (let n = 0; !stopLoad; n++) {
        const { eventId, key, body } = appendOf(loop, n);
        for (let attempt = 1; ; attempt++) {
          const start = Date.now();
          const record: Attempt = { eventId, start, end: start, status: 'network-error' };
          attempts.push(record);
          try {
            const res = await fetch(url, { method: 'POST', headers, body, signal: AbortSignal.timeout(20_000) });
            const json = (await res.json()) as { events?: { seq: number }[]; error?: { code: string } };
            Object.assign(record, { end: Date.now(), status: res.status, code: json.error?.code, retryAfter: res.headers.get('retry-after') });
            if (res.status === 200 || res.status === 201) {
              ledger.push({ eventId, loop, n, sessionId, key, seq: json.events![0]!.seq, status: res.status, attempts: attempt });
              break;
            }
          } catch {
            record.end = Date.now();
          }
          if (attempt > 400) throw new Error(`event ${eventId} was never acknowledged`);
          await sleep(RETRY_PAUSE_MS);
        }
      }
    };
    const clientsDone = Promise.all(Array.from({ length: LOOPS }, (_, loop) => client(loop)));
    // A client that gives up ends the waits below at once instead of at the test's timeout.
    let clientFailure: unknown;
    clientsDone.catch((error: unknown) => (clientFailure = error));
    const waitForAcks = async (count: number, deadline = Infinity) => {
      while (ledger.length < count && Date.now() < deadline) {
        if (clientFailure) throw clientFailure;
        await sleep(20);
      }
    };

    // Phase 1: load against a healthy database.
    await waitForAcks(200);
    const beforeOutage = ledger.length;

    // Phase 2: the database dies under load.
    await cluster.stopImmediate();
    const stopped = Date.now();
    await sleep(500);
    expect(running.alive(), `the service exited:\n${running.output().slice(-3_000)}`).toBe(true);
    const readyProbe = await timed(async () => {
      const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) });
      return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: { code: string } } };
    });
    const liveProbe = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(10_000) });
    await sleep(1_500);
    expect(running.alive()).toBe(true);

    // Phase 3: the database returns; readiness must follow within READY_WITHIN_MS.
    const restarting = Date.now();
    await cluster.start();
    const accepting = Date.now();
    let readyAfterMs = -1;
    while (Date.now() - accepting < READY_WITHIN_MS + 2_000) {
      const res = await fetch(`${base}/readyz`, { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
      if (res?.status === 200) {
        readyAfterMs = Date.now() - accepting;
        break;
      }
      await sleep(25);
    }
    const ackedAtRecovery = ledger.length;
    await waitForAcks(ackedAtRecovery + 100, accepting + 10_000);
    stopLoad = true;
    await clientsDone;
    const loadDone = Date.now();

    // The process never exited.
    expect(running.alive(), running.output().slice(-3_000)).toBe(true);

    // A retry of an append that was already acknowledged (its answer lost, say) converges on the
    // stored event: 200, the same seq, nothing written. The events retried across the outage and
    // the last event of every client are resent.
    const resent = [...ledger.filter((a) => a.attempts > 1), ...Array.from({ length: LOOPS }, (_, loop) => ledger.findLast((a) => a.loop === loop)!)];
    for (const ack of resent) {
      const { body } = appendOf(ack.loop, ack.n);
      const res = await fetch(`${base}/v1/spaces/${spaceId}/users/u1/sessions/${ack.sessionId}/events`, { method: 'POST', headers, body });
      expect(res.status, `resend of ${ack.eventId}`).toBe(200);
      expect(((await res.json()) as { events: { seq: number }[] }).events[0]!.seq).toBe(ack.seq);
    }

    // During the outage: not ready (503 with Retry-After), alive, and every request failed fast
    // with 503 ResourceUnavailable.Database and Retry-After.
    expect(readyProbe.value.status).toBe(503);
    expect(readyProbe.value.retryAfter).toMatch(/^\d+$/);
    expect(readyProbe.value.body.error?.code).toBe('ResourceUnavailable.Database');
    expect(readyProbe.ms).toBeLessThan(CONNECT_TIMEOUT_MS + FAIL_FAST_MARGIN_MS);
    expect(liveProbe.status).toBe(200);
    const duringOutage = attempts.filter((a) => a.start >= stopped && a.end <= restarting);
    expect(duringOutage.length).toBeGreaterThan(LOOPS);
    for (const a of duringOutage) expect(a).toMatchObject({ status: 503, code: 'ResourceUnavailable.Database', retryAfter: expect.stringMatching(/^\d+$/) });
    const outageMaxMs = Math.max(...duringOutage.map((a) => a.end - a.start));
    expect(outageMaxMs).toBeLessThan(CONNECT_TIMEOUT_MS + FAIL_FAST_MARGIN_MS);

    // Over the whole run: only 201, 200 (a replay of an append whose answer was lost) and 503;
    // every 503 is the database code; no connection was dropped and no request hung.
    const statuses = countBy(attempts.map((a) => String(a.status)));
    expect(Object.keys(statuses).sort()).toEqual(expect.arrayContaining(['201', '503']));
    for (const status of Object.keys(statuses)) expect(['200', '201', '503']).toContain(status);
    for (const a of attempts.filter((a) => a.status === 503)) expect(a.code).toBe('ResourceUnavailable.Database');

    // Readiness recovered within READY_WITHIN_MS of the database accepting connections, and appends
    // were acknowledged again after it.
    expect(readyAfterMs, `never ready again; the database's log:\n${(await cluster.log()).slice(-3_000)}`).toBeGreaterThanOrEqual(0);
    expect(readyAfterMs).toBeLessThan(READY_WITHIN_MS);
    expect(ledger.length).toBeGreaterThan(ackedAtRecovery);

    // What the server logged for the failed requests: all mapped to the database code, no 500.
    const failures = running.logLines().filter((line) => line.msg === 'request failed');
    for (const line of failures) expect(line.code).toBe('ResourceUnavailable.Database');
    const observed = countBy(failures.map((line) => describeLoggedError(line.err)));

    // The ledger: every acknowledged eventId is stored exactly once, with the seq it was
    // acknowledged with; seq is 1..n per session; eventCount and the state match.
    const check = new pg.Client({ connectionString: cluster.url() });
    await check.connect();
    try {
      const events = (
        await check.query<{ session_id: string; event_id: string; seq: number }>(
          `SELECT session_id, event_id, seq::int AS seq FROM events WHERE space_id = $1 ORDER BY session_id, seq`,
          [spaceId],
        )
      ).rows;
      const sessions = (
        await check.query<{ session_id: string; event_count: number; revision: number; state: Record<string, number> }>(
          `SELECT session_id, event_count::int AS event_count, revision::int AS revision, state FROM sessions WHERE space_id = $1`,
          [spaceId],
        )
      ).rows;

      const stored = new Map<string, { session_id: string; seq: number }[]>();
      for (const row of events) stored.set(row.event_id, [...(stored.get(row.event_id) ?? []), row]);
      for (const ack of ledger) {
        expect(stored.get(ack.eventId), ack.eventId).toEqual([{ session_id: ack.sessionId, seq: ack.seq, event_id: ack.eventId }]);
      }
      // Every client retried until acknowledged, so nothing is stored that the ledger lacks.
      expect(events.length).toBe(ledger.length);
      expect(new Set(ledger.map((a) => a.eventId)).size).toBe(ledger.length);

      for (const session of sessions) {
        const seqs = events.filter((row) => row.session_id === session.session_id).map((row) => row.seq);
        expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 1));
        expect(session.event_count).toBe(seqs.length);
        expect(session.revision).toBe(1 + seqs.length);
        const keys = ledger.filter((a) => a.sessionId === session.session_id).map((a) => a.key);
        expect(Object.keys(session.state).sort()).toEqual(keys.sort());
      }
    } finally {
      await check.end();
    }

    const retried = ledger.filter((a) => a.attempts > 1);
    console.log(
      JSON.stringify({
        ledger: ledger.length,
        ackedBeforeOutage: beforeOutage,
        ackedAfterRecovery: ledger.length - ackedAtRecovery,
        attempts: attempts.length,
        statuses,
        eventsRetried: retried.length,
        maxAttemptsForOneEvent: Math.max(...ledger.map((a) => a.attempts)),
        replaysAcknowledged200: ledger.filter((a) => a.status === 200).length,
        resentAfterwards: resent.length,
        outageRequests: duringOutage.length,
        outageMaxLatencyMs: outageMaxMs,
        readyzDuringOutageMs: readyProbe.ms,
        outageMs: restarting - stopped,
        restartMs: accepting - restarting,
        readyAfterDatabaseAcceptsMs: readyAfterMs,
        loadAfterRecoveryMs: loadDone - accepting,
        observedErrors: observed,
      }),
    );
  });
});

describe('a database that accepts connections but never answers', () => {
  it('answers 503 within the connect timeout instead of hanging', async () => {
    // A TCP listener that never speaks the protocol: the connect succeeds, the startup never does.
    const sockets: Socket[] = [];
    const blackHole = createServer((socket) => void sockets.push(socket));
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
    const { port } = blackHole.address() as AddressInfo;
    const handle = await openDatabase({ kind: 'postgres', url: `postgres://postgres@127.0.0.1:${port}/x`, poolMax: 2, statementTimeoutMs: 1_000, connectTimeoutMs: 300 });
    const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS });
    try {
      for (const request of [
        { method: 'GET' as const, url: '/readyz' },
        { method: 'GET' as const, url: '/v1/spaces', headers: { authorization: `Bearer ${issueCredential().token}` } },
      ]) {
        const started = Date.now();
        const res = await app.inject(request);
        const elapsed = Date.now() - started;
        expect(res.statusCode, request.url).toBe(503);
        expect(res.json().error.code).toBe('ResourceUnavailable.Database');
        expect(res.headers['retry-after']).toMatch(/^\d+$/);
        expect(elapsed).toBeGreaterThanOrEqual(250);
        expect(elapsed).toBeLessThan(2_000);
      }
      expect(sockets.length).toBeGreaterThan(0);
    } finally {
      await app.close();
      await handle.close();
      for (const socket of sockets) socket.destroy();
      blackHole.close();
    }
  });
});

/** Client `loop`'s n-th append: a fixed body, so every retry resends exactly the same event. */
function appendOf(loop: number, n: number): { eventId: string; key: string; body: string } {
  const eventId = `e-${loop}-${n}`;
  const key = `k-${loop}-${n}`;
  return { eventId, key, body: JSON.stringify({ eventId, author: 'agent', content: { parts: [{ text: `turn ${n}` }] }, actions: { stateDelta: { [key]: n } } }) };
}

async function timed<T>(fn: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  const value = await fn();
  return { value, ms: Date.now() - start };
}

function countBy(values: string[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
  return counts;
}

function describeLoggedError(err: unknown): string {
  const e = (err ?? {}) as { type?: string; code?: string; message?: string };
  return `${e.type ?? '?'}${e.code ? ` ${e.code}` : ''}: ${(e.message ?? '').slice(0, 80)}`;
}
