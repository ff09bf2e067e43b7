// SIGTERM while a request is in flight: the request finishes with its 2xx, no new connection is
// accepted, the pool closes and the process exits 0. The request is held in flight
// deterministically: a separate connection locks the session row, so the append waits on it.
import { Agent, request } from 'node:http';
import { connect } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { APPLICATION_NAME } from '../../src/db/connect.js';
import { issueCredential } from '../../src/modules/accounts/credentials.js';
import { type ServiceProcess, freePort, killServiceProcess, sleep, startServiceProcess, waitUntilReady } from '../support/service-process.js';
import { type ClonedDatabase, cloneMigratedDatabase } from '../support/test-database.js';

const backend = inject('testBackend');

const keepAlive = new Agent({ keepAlive: true });

function postJson(url: string, headers: Record<string, string>, body: unknown): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: 'POST', headers, agent: keepAlive, timeout: 30_000 }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as unknown }));
    });
    req.once('timeout', () => req.destroy(new Error('request timed out')));
    req.once('error', reject);
    req.end(JSON.stringify(body));
  });
}

/** Resolves true when a TCP connect to the port is refused, false when it is accepted. */
function refused(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(false);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => resolve(error.code === 'ECONNREFUSED'));
  });
}

// Holding a row lock needs a second connection to the service's database, and the pool check
// reads pg_stat_activity: PostgreSQL only (PGlite is one session inside the service's process).
describe.runIf(backend.kind === 'postgres')('graceful shutdown on SIGTERM (PostgreSQL)', () => {
  const adminUrl = backend.kind === 'postgres' ? backend.adminUrl : '';
  let database: ClonedDatabase;
  let admin: pg.Client;
  let service: ServiceProcess | undefined;

  beforeAll(async () => {
    database = await cloneMigratedDatabase('ass_shutdown');
    admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
  });
  afterAll(async () => {
    killServiceProcess(service);
    await service?.exited;
    await database?.drop();
    await admin.end();
    keepAlive.destroy();
  });

  const serviceConnections = async (where = '') =>
    Number(
      (
        await admin.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2 ${where}`, [
          database.name,
          APPLICATION_NAME,
        ])
      ).rows[0]!.n,
    );

  it('finishes the in-flight request, refuses new connections, closes the pool and exits 0', { timeout: 60_000 }, async () => {
    const token = issueCredential().token;
    const port = await freePort();
    service = startServiceProcess({
      DATABASE_URL: database.url,
      ROOT_API_KEY: token,
      PORT: String(port),
      LOG_LEVEL: 'info',
      RATE_LIMIT_MAX: '0',
      // Longer than the shutdown's grace period: the exit must not wait for idle keep-alive connections.
      HTTP_KEEP_ALIVE_TIMEOUT_MS: '60000',
    });
    await waitUntilReady(service);
    const base = service.baseUrl;
    const headers = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const space = await fetch(`${base}/v1/spaces`, { method: 'POST', headers, body: JSON.stringify({ name: 'shutdown' }) });
    const { spaceId } = (await space.json()) as { spaceId: string };
    const session = await fetch(`${base}/v1/spaces/${spaceId}/users/u1/sessions`, { method: 'POST', headers, body: JSON.stringify({ sessionId: 's1' }) });
    expect(session.status).toBe(201);

    // Another connection takes the session's row lock; the append below queues behind it.
    const at = { signalled: 0, refused: 0, released: 0, answered: 0 };
    const locker = new pg.Client({ connectionString: database.url });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query(`SELECT 1 FROM sessions WHERE space_id = $1 AND user_id = 'u1' AND session_id = 's1' FOR UPDATE`, [spaceId]);
      // Over a keep-alive connection the client never closes, as a proxy's pool would hold it:
      // the service must not wait for the client to hang up once the request is answered.
      const answered = postJson(`${base}/v1/spaces/${spaceId}/users/u1/sessions/s1/events`, headers, {
        eventId: 'in-flight',
        author: 'agent',
        actions: { stateDelta: { done: true } },
      });
      let settled = false;
      void answered.then(
        () => (settled = true),
        () => (settled = true),
      );
      // The request is in flight once the service's connection waits on the lock.
      const waitingSince = Date.now();
      while ((await serviceConnections(`AND wait_event_type = 'Lock'`)) === 0) {
        if (Date.now() - waitingSince > 10_000) throw new Error('the append never reached the lock');
        await sleep(20);
      }
      expect(await refused(port)).toBe(false);

      service.child.kill('SIGTERM');
      at.signalled = Date.now();
      // New connections are refused soon after the signal, while the request is still held.
      while (!(await refused(port))) {
        if (Date.now() - at.signalled > 5_000) throw new Error('the service still accepts connections 5 s after SIGTERM');
        await sleep(20);
      }
      at.refused = Date.now();
      await sleep(300);
      expect(service.alive()).toBe(true);
      expect(settled).toBe(false);

      // Releasing the lock lets the in-flight append finish: it is answered and stored.
      await locker.query('COMMIT');
      at.released = Date.now();
      const result = await answered;
      at.answered = Date.now();
      expect(result.status).toBe(201);
      expect((result.body as { events: { seq: number }[] }).events[0]!.seq).toBe(1);
    } finally {
      await locker.end();
    }

    // The process exits 0 at once: it does not wait for the idle keep-alive connection.
    expect(await service.exited).toEqual({ code: 0, signal: null });
    const exited = Date.now();
    expect(exited - at.answered).toBeLessThan(5_000);
    console.log(
      JSON.stringify({
        refusedAfterSignalMs: at.refused - at.signalled,
        answeredAfterReleaseMs: at.answered - at.released,
        exitedAfterAnswerMs: exited - at.answered,
        exitedAfterSignalMs: exited - at.signalled,
      }),
    );
    // In that order: the held append was answered, then the pool ended the connections it still
    // had (at least the one that carried the append), then the process exited. (pg_stat_activity
    // after the exit would show nothing whether or not the pool was closed: the exit closes the
    // sockets either way, so it is not read here.)
    const lines = service.logLines();
    const appended = lines.findIndex((line) => line.msg === 'request completed' && line.method === 'POST' && String(line.route).endsWith('/events'));
    const closed = lines.findIndex((line) => line.msg === 'shut down: requests finished, database pool closed');
    expect(appended).toBeGreaterThan(-1);
    expect(closed).toBeGreaterThan(appended);
    expect(lines[appended]).toMatchObject({ statusCode: 201 });
    expect(lines[closed]!.closedConnections).toBeGreaterThanOrEqual(1);
    const check = new pg.Client({ connectionString: database.url });
    await check.connect();
    try {
      const rows = (await check.query(`SELECT seq::int AS seq FROM events WHERE space_id = $1 AND event_id = 'in-flight'`, [spaceId])).rows;
      expect(rows).toEqual([{ seq: 1 }]);
    } finally {
      await check.end();
    }
  });
});
