// The database pool shared fairly between accounts (src/db/fair-pool.ts): account A's requests
// that hold their connections for long (here: waiting for a row lock) fill only A's share of the
// pool, and account B's turn is answered at once. Without the share (DB_POOL_MAX_PER_ACCOUNT equal
// to the pool) the same load leaves B's turn waiting for a connection until the checkout times out:
// 503 ResourceUnavailable.Database, with nothing written.
//
// PostgreSQL only: the embedded database has one connection and one session, so nothing outside
// the app can hold a lock there for the app's requests to wait on (the order in which accounts are
// served is tested without a database in test/unit/account-slots.test.ts).
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterEach, describe, expect, inject, it } from 'vitest';
import type { DB } from '../../src/db/schema.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const POOL = 4;
const opened: TestApp[] = [];
const lockHolders: pg.Client[] = [];
const observers: Kysely<DB>[] = [];
afterEach(async () => {
  await Promise.all(lockHolders.splice(0).map((client) => client.end()));
  await Promise.all(observers.splice(0).map((observer) => observer.destroy()));
  await Promise.all(opened.splice(0).map((t) => t.close()));
});

async function setUp(poolPerAccount: number) {
  // Rate limit off; a short checkout wait so that the unfair case fails quickly.
  const t = await createTestApp({ poolMax: POOL, poolPerAccount, connectTimeoutMs: 1_000, limits: { rateLimitMax: 0 } });
  opened.push(t);
  const a = t.account;
  const b = await t.createAccount();
  const session = async (account: typeof a, sessionId: string) => {
    const res = await t.request({ method: 'POST', url: `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions`, payload: { sessionId }, token: account.rootCredential.token });
    expect(res.statusCode).toBe(201);
    return `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions/${sessionId}`;
  };
  const aSession = await session(a, 'locked');
  const bSession = await session(b, 'turns');
  // Another client holds A's session row locked: every PATCH of it waits inside its transaction,
  // holding its pool connection, until the lock is let go.
  const url = t.database.pool.options.connectionString;
  const holder = new pg.Client({ connectionString: url });
  // The test looks at the database through connections of its own: the app's pool may be full.
  const observer = new Kysely<DB>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
  observers.push(observer);
  lockHolders.push(holder);
  await holder.connect();
  await holder.query('BEGIN');
  await holder.query(`SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = 'locked' FOR UPDATE`, [a.accountId]);
  const patches = Array.from({ length: 6 }, (_, i) =>
    t.request({ method: 'PATCH', url: aSession, payload: { title: `patch ${i}` }, token: a.rootCredential.token }),
  );
  const waitingForLock = async () => {
    const rows = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(observer);
    return rows.rows[0]!.n;
  };
  const poolWaiting = async () => sampleValue(parsePrometheusText((await t.request({ method: 'GET', url: '/metrics', token: null })).body), 'db_pool_waiting_clients');
  const bTurn = async () => {
    const appended = await t.request({ method: 'POST', url: `${bSession}/events`, payload: { author: 'user', actions: { stateDelta: { turn: 1 } } }, token: b.rootCredential.token });
    const context = await t.request({ method: 'GET', url: `${bSession}/context`, token: b.rootCredential.token });
    return { appended, context };
  };
  /** Lets the lock go; A's PATCHes then answer in turn (the ones that waited past the checkout timeout: 503). */
  const letGo = async () => {
    await holder.query('ROLLBACK');
    return (await Promise.all(patches)).map((res) => (res.statusCode === 200 ? '200' : `${res.statusCode} ${res.json().error.code}`)).sort();
  };
  return { observer, waitingForLock, poolWaiting, bTurn, letGo };
}

describe.runIf(inject('testBackend').kind === 'postgres')('the database pool shared between accounts (PostgreSQL: an outside connection holds the locks)', () => {
  it("keeps one account's slow requests to its share of the pool, so another account's turn is answered 2xx", async () => {
    const { waitingForLock, poolWaiting, bTurn, letGo } = await setUp(2);
    // A holds its share (2 connections, both waiting for the lock); its other 4 PATCHes wait for A's turn.
    await expect.poll(waitingForLock).toBe(2);
    await expect.poll(poolWaiting).toBe(4);

    const { appended, context } = await bTurn();
    expect(appended.statusCode).toBe(201);
    expect(appended.json().session.state).toEqual({ turn: 1 });
    expect(context.statusCode).toBe(200);
    expect(context.json().events.map((event: { seq: number }) => event.seq)).toEqual([1]);
    // A is still held at its share meanwhile; every one of its PATCHes is answered once the lock goes.
    expect(await waitingForLock()).toBe(2);
    expect(await letGo()).toEqual(Array(6).fill('200'));
  });

  it("without a share, the same load leaves B's append waiting for a connection: 503 ResourceUnavailable.Database, nothing written", async () => {
    const { observer, waitingForLock, bTurn, letGo } = await setUp(POOL);
    await expect.poll(waitingForLock).toBe(POOL);
    const before = await tableFingerprints(observer);
    const { appended } = await bTurn();
    expect(appended.statusCode).toBe(503);
    expect(appended.json().error.code).toBe('ResourceUnavailable.Database');
    expect(changedTables(before, await tableFingerprints(observer))).toEqual([]);
    // A's own PATCHes that queued behind its first four timed out the same way.
    expect(await letGo()).toEqual(['200', '200', '200', '200', '503 ResourceUnavailable.Database', '503 ResourceUnavailable.Database']);
  });
});
