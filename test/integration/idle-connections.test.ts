// A turn works after any pause and after its pooled connection is dropped (issue 20). The pool closes
// an idle connection after DB_POOL_IDLE_TIMEOUT_MS; on PGlite the next connection lands on the same
// database session, which kept what the last one left there (named statements above all: a new pg
// client prepares them again, and PGlite answered `prepared statement "append_events" already
// exists` to every turn after the first ten idle seconds). On both backends: the turn after each
// pause and after each drop is answered, /readyz says so, and the credential cache stays on without a
// warning per pause.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { type ListeningCredentialCache, startCredentialCache } from '../../src/modules/accounts/credential-cache-listener.js';
import { sleep } from '../support/service-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

const backend = inject('testBackend');
const SHORT_IDLE_MS = 300;
// pg's default, which the service keeps unless DB_POOL_IDLE_TIMEOUT_MS says otherwise.
const DEFAULT_IDLE_MS = 10_000;

interface Embedded {
  app: FastifyInstance;
  database: TestDatabase;
  account: CreatedAccount;
  credentialCache: ListeningCredentialCache;
  warnings: string[];
}

const open: Embedded[] = [];
afterEach(async () => {
  for (const { app, database } of open.splice(0)) {
    await app.close();
    await database.dispose();
  }
});

async function start(idleTimeoutMs: number | undefined, beforeConnecting?: (database: TestDatabase) => Promise<void>): Promise<Embedded> {
  const database = await createTestDatabase({ idleTimeoutMs });
  await beforeConnecting?.(database); // the pool and the listener connect on first use, below
  const warnings: string[] = [];
  const logger = { info: () => {}, warn: (_: object, message: string) => void warnings.push(message) };
  const credentialCache = startCredentialCache(database.listen, { maxEntries: 100, logger });
  const app = await buildApp({ db: database.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 }, credentialCache });
  await app.ready();
  const account = await createAccount(database.db, `idle-${randomUUID()}`);
  const embedded = { app, database, account, credentialCache, warnings };
  open.push(embedded);
  return embedded;
}

/** One agent turn: append, context, describe; each answer's status. */
async function turn({ app, account }: Embedded, sessionId: string, n: number): Promise<number[]> {
  const base = `/v1/spaces/${account.defaultSpaceId}/users/u/sessions/${sessionId}`;
  const headers = { authorization: `Bearer ${account.rootCredential.token}` };
  const appended = await app.inject({ method: 'POST', url: `${base}/events`, headers, payload: { author: 'user', actions: { stateDelta: { [`turn${n}`]: n } } } });
  const context = await app.inject({ method: 'GET', url: `${base}/context`, headers });
  const described = await app.inject({ method: 'GET', url: base, headers });
  if (appended.statusCode === 201) expect(appended.json().events[0].seq).toBe(n);
  return [appended.statusCode, context.statusCode, described.statusCode];
}

async function newSession({ app, account }: Embedded): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  const res = await app.inject({
    method: 'POST',
    url: `/v1/spaces/${account.defaultSpaceId}/users/u/sessions`,
    headers: { authorization: `Bearer ${account.rootCredential.token}` },
    payload: { sessionId },
  });
  expect(res.statusCode).toBe(201);
  return sessionId;
}

const ready = async ({ app }: Embedded) => (await app.inject({ method: 'GET', url: '/readyz' })).statusCode;

describe(`turns after pauses and dropped connections (${backend.kind})`, () => {
  it('answers every turn after pauses longer than the pool\'s idle timeout, which closed the connection each time', async () => {
    const embedded = await start(SHORT_IDLE_MS);
    const sessionId = await newSession(embedded);
    expect(await turn(embedded, sessionId, 1)).toEqual([201, 200, 200]);
    for (let n = 2; n <= 4; n++) {
      await sleep(SHORT_IDLE_MS * 3);
      expect(embedded.database.pool.totalCount).toBe(0); // the pool did close it
      expect(await ready(embedded)).toBe(200);
      expect(await turn(embedded, sessionId, n)).toEqual([201, 200, 200]);
    }
    // The cache stayed on through every pause: no "credential cache off" warning.
    expect(embedded.warnings).toEqual([]);
    expect(embedded.credentialCache.cache.enabled).toBe(true);
  });

  it('answers a turn after a pause past the default idle timeout', { timeout: 60_000 }, async () => {
    const embedded = await start(undefined);
    const sessionId = await newSession(embedded);
    expect(await turn(embedded, sessionId, 1)).toEqual([201, 200, 200]);
    await sleep(DEFAULT_IDLE_MS + 1_500);
    expect(embedded.database.pool.totalCount).toBe(0);
    expect(await turn(embedded, sessionId, 2)).toEqual([201, 200, 200]);
    expect(embedded.warnings).toEqual([]);
  });

  it('answers the turns after the pooled connection is dropped under it, and /readyz says 503 only while a turn would fail', async () => {
    const embedded = await start(undefined);
    const sessionId = await newSession(embedded);
    expect(await turn(embedded, sessionId, 1)).toEqual([201, 200, 200]);
    // The pool's connection ends from the other side while idle: on PostgreSQL the backend is
    // terminated; on PGlite the socket to the embedded server is cut.
    await dropIdleConnection(embedded.database);
    await sleep(100);
    expect(await ready(embedded)).toBe(200);
    expect(await turn(embedded, sessionId, 2)).toEqual([201, 200, 200]);
    await dropIdleConnection(embedded.database);
    await sleep(100);
    expect(await turn(embedded, sessionId, 3)).toEqual([201, 200, 200]);
  });

  it.runIf(backend.kind === 'postgres')('answers every turn when the server closes idle sessions sooner than the pool would (idle_session_timeout, a PostgreSQL setting), and keeps the listener', async () => {
    const SERVER_IDLE_MS = 200;
    const embedded = await start(undefined, async (database) => {
      const name = new URL(database.pool.options.connectionString!).pathname.slice(1);
      const admin = new pg.Client({ connectionString: backend.kind === 'postgres' ? backend.adminUrl : '' });
      await admin.connect();
      await admin.query(`ALTER DATABASE "${name}" SET idle_session_timeout = ${SERVER_IDLE_MS}`);
      await admin.end();
    });
    const { rows } = await embedded.database.pool.query<{ idle_session_timeout: string }>('SHOW idle_session_timeout');
    expect(rows[0]!.idle_session_timeout).toBe('0');
    const sessionId = await newSession(embedded);
    for (let n = 1; n <= 4; n++) {
      expect(await turn(embedded, sessionId, n)).toEqual([201, 200, 200]);
      await sleep(SERVER_IDLE_MS * 3);
    }
    expect(embedded.warnings).toEqual([]);
    expect(embedded.credentialCache.cache.enabled).toBe(true);
  });

  it.runIf(backend.kind === 'postgres')('answers writes 503 ResourceUnavailable.Database with Retry-After while the database is read-only (a PostgreSQL standby, a demoted primary), and /readyz 503', async () => {
    const embedded = await start(undefined);
    const sessionId = await newSession(embedded);
    expect(await turn(embedded, sessionId, 1)).toEqual([201, 200, 200]);
    const name = new URL(embedded.database.pool.options.connectionString!).pathname.slice(1);
    const admin = new pg.Client({ connectionString: backend.kind === 'postgres' ? backend.adminUrl : '' });
    await admin.connect();
    const headers = { authorization: `Bearer ${embedded.account.rootCredential.token}` };
    const base = `/v1/spaces/${embedded.account.defaultSpaceId}/users/u/sessions`;
    try {
      // What a hot standby answers every write (SQLSTATE 25006), on the connections opened from now on.
      await admin.query(`ALTER DATABASE "${name}" SET default_transaction_read_only = on`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
      await sleep(100);
      for (const request of [
        { method: 'POST' as const, url: `${base}/${sessionId}/events`, payload: { author: 'user' } },
        { method: 'POST' as const, url: base, payload: { sessionId: 'new' } },
        { method: 'PATCH' as const, url: `${base}/${sessionId}`, payload: { title: 't' } },
      ]) {
        const res = await embedded.app.inject({ ...request, headers });
        expect(res.statusCode, `${request.method} ${request.url}: ${res.body}`).toBe(503);
        expect(res.json().error.code).toBe('ResourceUnavailable.Database');
        expect(res.headers['retry-after']).toBeDefined();
      }
      expect((await embedded.app.inject({ method: 'GET', url: `${base}/${sessionId}`, headers })).statusCode).toBe(200);
      expect(await ready(embedded)).toBe(503);
      await admin.query(`ALTER DATABASE "${name}" RESET default_transaction_read_only`);
      await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [name]);
      await sleep(100);
      expect(await ready(embedded)).toBe(200);
      expect(await turn(embedded, sessionId, 2)).toEqual([201, 200, 200]);
    } finally {
      await admin.query(`ALTER DATABASE "${name}" RESET default_transaction_read_only`).catch(() => {});
      await admin.end();
    }
  });

  it.runIf(backend.kind === 'postgres')('answers /readyz 503 while the database refuses connections, as a turn would fail, and 200 once it takes them again (PostgreSQL: a server that can refuse)', async () => {
    const embedded = await start(SHORT_IDLE_MS);
    const sessionId = await newSession(embedded);
    const name = new URL(embedded.database.pool.options.connectionString!).pathname.slice(1);
    const admin = new pg.Client({ connectionString: backend.kind === 'postgres' ? backend.adminUrl : '' });
    await admin.connect();
    try {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS false`);
      await sleep(SHORT_IDLE_MS * 3); // the pooled connection is closed; a new one is refused
      const [appended] = await turn(embedded, sessionId, 1);
      expect(appended).toBe(503);
      expect(await ready(embedded)).toBe(503);
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`);
      expect(await ready(embedded)).toBe(200);
      expect(await turn(embedded, sessionId, 1)).toEqual([201, 200, 200]);
    } finally {
      await admin.query(`ALTER DATABASE "${name}" ALLOW_CONNECTIONS true`).catch(() => {});
      await admin.end();
    }
  });
});

/** Ends the pool's idle connection from the server's side (PostgreSQL) or cuts its socket (PGlite). */
async function dropIdleConnection(database: TestDatabase): Promise<void> {
  const client = await database.pool.connect();
  if (database.kind === 'postgres') {
    const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    client.release();
    const other = new pg.Client({ connectionString: database.pool.options.connectionString });
    await other.connect();
    await other.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
    await other.end();
  } else {
    client.release();
    (client as unknown as { connection: { stream: { destroy(): void } } }).connection.stream.destroy();
  }
}
