// SIGTERM while keep-alive clients append without pause: every request the client wrote in full is
// answered (201, or 503 ResourceUnavailable.ShuttingDown with Connection: close); none has its
// connection closed under it without an answer, which a client cannot tell from a lost answer and
// must not resend when the call is not repeatable. A request that never left the client (a refused
// connection once the service stops listening) is fine: nothing was sent. The appends answered 201
// are stored, the ones answered 503 are not.
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { openDatabase } from '../../src/db/connect.js';
import { issueCredential } from '../../src/modules/accounts/credentials.js';
import { type ServiceProcess, freePort, killServiceProcess, sleep, startServiceProcess, waitUntilReady } from '../support/service-process.js';
import { type ClonedDatabase, cloneMigratedDatabase } from '../support/test-database.js';

const backend = inject('testBackend');

const CLIENTS = 32;
/** Clients that hold an idle keep-alive connection when the drain begins, then call on it. */
const IDLE_CLIENTS = 4;
const TRAFFIC_BEFORE_SIGNAL_MS = 1_500;

type Outcome =
  | { kind: 'answered'; status: number; code: string | undefined; connection: string | undefined; retryAfter: string | undefined }
  | { kind: 'not sent'; error: string }
  | { kind: 'lost answer'; error: string };

interface Sent {
  sessionId: string;
  eventId: string;
  outcome: Outcome;
}

/** Resolves once `port` refuses a new connection: the server stopped listening, so its drain began. */
async function untilListeningStops(port: number): Promise<void> {
  for (;;) {
    const refused = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(false);
      });
      socket.once('error', () => resolve(true));
    });
    if (refused) return;
    await sleep(5);
  }
}

/**
 * One POST over `agent`. `written` turns true once the whole request was handed to the socket: an
 * error after that is an answer lost, before it a request that never left.
 */
function post(agent: Agent, url: string, headers: Record<string, string>, body: unknown): Promise<Outcome> {
  return new Promise((resolve) => {
    let written = false;
    const req = request(url, { method: 'POST', headers, agent, timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => {
        const parsed = JSON.parse(text) as { error?: { code?: string } };
        resolve({
          kind: 'answered',
          status: res.statusCode ?? 0,
          code: parsed.error?.code,
          connection: res.headers.connection,
          retryAfter: res.headers['retry-after'],
        });
      });
      res.on('error', (error: NodeJS.ErrnoException) => resolve({ kind: 'lost answer', error: `${error.code ?? error.message} (mid-body)` }));
    });
    req.once('finish', () => (written = true));
    req.once('timeout', () => req.destroy(new Error('request timed out')));
    req.once('error', (error: NodeJS.ErrnoException) => resolve({ kind: written ? 'lost answer' : 'not sent', error: error.code ?? error.message }));
    req.end(JSON.stringify(body));
  });
}

describe('SIGTERM under keep-alive traffic', () => {
  let service: ServiceProcess | undefined;
  let database: ClonedDatabase | undefined;
  let dataDir: string | undefined;
  afterAll(async () => {
    killServiceProcess(service);
    await service?.exited;
    await database?.drop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  it('answers every request written in full (201, or 503 ShuttingDown with Connection: close), stores exactly the 201s, and exits promptly', { timeout: 90_000 }, async () => {
    const token = issueCredential().token;
    let where: Record<string, string>;
    if (backend.kind === 'postgres') {
      database = await cloneMigratedDatabase('ass_shutdown_keepalive');
      where = { DATABASE_URL: database.url };
    } else {
      dataDir = await mkdtemp(join(tmpdir(), 'ass-shutdown-keepalive-'));
      await cp(backend.dataDir, dataDir, { recursive: true });
      where = { DATA_DIR: dataDir };
    }
    service = startServiceProcess({
      ...where,
      ROOT_API_KEY: token,
      PORT: String(await freePort()),
      LOG_LEVEL: 'warn',
      RATE_LIMIT_MAX: '0',
      // Far longer than the shutdown takes: idle connections close because of the drain, not the timeout.
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000',
    });
    await waitUntilReady(service);
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const space = await fetch(`${service.baseUrl}/v1/spaces`, { method: 'POST', headers, body: JSON.stringify({ name: 'keep-alive shutdown' }) });
    const { spaceId } = (await space.json()) as { spaceId: string };
    const sessions = `${service.baseUrl}/v1/spaces/${spaceId}/users/u1/sessions`;

    const sent: Sent[] = [];
    let signalledAt = 0;
    // Each client keeps one connection and appends to its own session, pausing 0–20 ms between
    // calls: at any moment some connections are idle and some carry a request.
    const client = async (n: number) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const sessionId = `s${n}`;
      try {
        const created = await post(agent, sessions, headers, { sessionId });
        expect(created).toMatchObject({ kind: 'answered', status: 201 });
        for (let i = 0; ; i++) {
          const eventId = `e${i}`;
          const outcome = await post(agent, `${sessions}/${sessionId}/events`, headers, { eventId, author: 'agent' });
          sent.push({ sessionId, eventId, outcome });
          if (outcome.kind !== 'answered' && signalledAt > 0) return;
          if (outcome.kind === 'answered' && outcome.status !== 201) return;
          await sleep(Math.floor(Math.random() * 21));
        }
      } finally {
        agent.destroy();
      }
    };
    // Which of the busy clients are between two calls when the drain begins is chance (on one PGlite
    // connection they may all be waiting for an answer): these clients certainly are. Each appends
    // once, keeps its connection idle until the service stops listening (the drain has begun), then
    // calls on it, within the drain's grace period: the answer must be 503 ShuttingDown, not a reset.
    const idleClient = async (n: number) => {
      const agent = new Agent({ keepAlive: true, maxSockets: 1 });
      const sessionId = `idle${n}`;
      try {
        expect(await post(agent, sessions, headers, { sessionId })).toMatchObject({ kind: 'answered', status: 201 });
        const first = await post(agent, `${sessions}/${sessionId}/events`, headers, { eventId: 'e0', author: 'agent' });
        sent.push({ sessionId, eventId: 'e0', outcome: first });
        idleReady += 1;
        await stopped;
        const outcome = await post(agent, `${sessions}/${sessionId}/events`, headers, { eventId: 'e1', author: 'agent' });
        sent.push({ sessionId, eventId: 'e1', outcome });
        return outcome;
      } finally {
        agent.destroy();
      }
    };
    let idleReady = 0;
    let signalled!: () => void;
    const stopped = new Promise<void>((resolve) => (signalled = resolve)).then(() => untilListeningStops(Number(new URL(service!.baseUrl).port)));
    const clients = Array.from({ length: CLIENTS }, (_, n) => client(n));
    const idleClients = Array.from({ length: IDLE_CLIENTS }, (_, n) => idleClient(n));
    // The signal waits for traffic, not only time: on a loaded machine the first calls are slow.
    const trafficFrom = Date.now();
    const answered201 = () => sent.filter(({ outcome }) => outcome.kind === 'answered' && outcome.status === 201).length;
    while (Date.now() - trafficFrom < TRAFFIC_BEFORE_SIGNAL_MS || answered201() < 2 * CLIENTS || idleReady < IDLE_CLIENTS) await sleep(20);
    service.child.kill('SIGTERM');
    signalledAt = Date.now();
    signalled();
    await Promise.all(clients);
    const idleOutcomes = await Promise.all(idleClients);
    const exit = await service.exited;
    const exitedAfterSignalMs = Date.now() - signalledAt;

    const tally: Record<string, number> = {};
    for (const { outcome } of sent) {
      const key = outcome.kind === 'answered' ? `${outcome.status} ${outcome.code ?? ''}`.trim() : `${outcome.kind}: ${outcome.error}`;
      tally[key] = (tally[key] ?? 0) + 1;
    }
    console.log(JSON.stringify({ tally, exitedAfterSignalMs }));

    const lost = sent.filter(({ outcome }) => outcome.kind === 'lost answer');
    expect(lost.map(({ sessionId, eventId, outcome }) => ({ sessionId, eventId, outcome }))).toEqual([]);
    const answered = sent.flatMap(({ sessionId, eventId, outcome }) => (outcome.kind === 'answered' ? [{ sessionId, eventId, ...outcome }] : []));
    for (const answer of answered) {
      if (answer.status === 201) continue;
      expect(answer).toMatchObject({ status: 503, code: 'ResourceUnavailable.ShuttingDown', connection: 'close', retryAfter: '1' });
    }
    // Traffic ran on both sides of the signal: some appends stored, and the calls on connections
    // idle when the drain began refused by it.
    expect(answered.filter((answer) => answer.status === 201).length).toBeGreaterThan(CLIENTS);
    for (const outcome of idleOutcomes) {
      expect(outcome).toMatchObject({ kind: 'answered', status: 503, code: 'ResourceUnavailable.ShuttingDown', connection: 'close' });
    }
    expect(exit).toEqual({ code: 0, signal: null });
    expect(exitedAfterSignalMs).toBeLessThan(5_000);

    // Stored: exactly the appends answered 201.
    const handle =
      backend.kind === 'postgres'
        ? await openDatabase({ kind: 'postgres', url: database!.url, poolMax: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 })
        : await openDatabase({ kind: 'pglite', dataDir: dataDir!, statementTimeoutMs: 60_000 });
    try {
      const rows = await handle.db.selectFrom('events').select(['session_id', 'event_id']).where('space_id', '=', spaceId).execute();
      const stored = rows.map((row) => `${row.session_id}/${row.event_id}`).sort();
      const acknowledged = answered.filter((answer) => answer.status === 201).map((answer) => `${answer.sessionId}/${answer.eventId}`).sort();
      expect(stored).toEqual(acknowledged);
    } finally {
      await handle.close();
    }
  });
});
