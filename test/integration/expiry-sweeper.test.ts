import { randomUUID } from 'node:crypto';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase } from '../../src/db/connect.js';
import { createAccount } from '../../src/modules/accounts/accounts.service.js';
import type { DB } from '../../src/db/schema.js';
import { startExpirySweeper, sweepExpiredSessions } from '../../src/modules/sessions/expiry-sweeper.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { until } from '../support/poll.js';
import { sleep } from '../support/service-process.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ poolMax: 10 });
});
afterAll(async () => t.close());
// The sweeper sees every account's sessions: each test starts with none expired.
afterEach(async () => {
  while ((await sweepExpiredSessions(t.db, { batchSize: 1000 })) > 0);
});

const onPglite = inject('testBackend').kind === 'pglite';
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

interface Key {
  accountId: string;
  spaceId: string;
  userId: string;
  sessionId: string;
}

/** Sessions inserted directly, `events` events each, expired a minute ago when `expired`. */
async function seed(
  spaceId: string,
  userId: string,
  count: number,
  options: { expired?: boolean; expireIn?: string; events?: number; accountId?: string } = {},
): Promise<Key[]> {
  const keys: Key[] = [];
  for (const _ of range(count)) {
    const key = { accountId: options.accountId ?? t.account.accountId, spaceId, userId, sessionId: `s-${randomUUID()}` };
    await insertSession(t.db, key);
    const events = options.events ?? 0;
    if (events > 0) {
      await t.db
        .insertInto('events')
        .values(range(events).map((i) => ({ account_id: key.accountId, space_id: key.spaceId, user_id: key.userId, session_id: key.sessionId, seq: i + 1, event_id: `e-${i}`, author: 'user', event_time: new Date(), payload_hash: Buffer.alloc(32) })))
        .execute();
    }
    const interval = options.expired ? '-1 minute' : options.expireIn;
    if (interval) {
      await t.db.updateTable('sessions').set({ expire_time: sql<Date>`date_trunc('milliseconds', now()) + ${interval}::interval` }).where('session_id', '=', key.sessionId).execute();
    }
    keys.push(key);
  }
  return keys;
}

async function sessionIdsIn(spaceId: string): Promise<string[]> {
  const rows = await t.db.selectFrom('sessions').select('session_id').where('space_id', '=', spaceId).orderBy('session_id').execute();
  return rows.map((row) => row.session_id);
}

async function eventCountIn(spaceId: string): Promise<number> {
  const row = await t.db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).where('space_id', '=', spaceId).executeTakeFirstOrThrow();
  return Number(row.n);
}

async function storedCounts(spaceId: string): Promise<Record<string, number>> {
  const rows = await t.db.selectFrom('space_users').select(['user_id', 'session_count']).where('space_id', '=', spaceId).execute();
  return Object.fromEntries(rows.map((row) => [row.user_id, row.session_count]));
}

function captureLogger() {
  const debugs: { fields: object; message: string }[] = [];
  const infos: object[] = [];
  const errors: { fields: object; message: string }[] = [];
  return {
    debugs,
    infos,
    errors,
    debug: (fields: object, message: string) => void debugs.push({ fields, message }),
    info: (fields: object) => void infos.push(fields),
    error: (fields: object, message: string) => void errors.push({ fields, message }),
  };
}

describe('sweepExpiredSessions', () => {
  it('removes expired sessions and their events, leaves live and never-expiring ones, and decrements the counts', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const aliceExpired = await seed(spaceId, 'alice', 2, { expired: true, events: 3 });
    const aliceLive = await seed(spaceId, 'alice', 1, { expireIn: '1 hour', events: 2 });
    const bobExpired = await seed(spaceId, 'bob', 1, { expired: true, events: 1 });
    const carolForever = await seed(spaceId, 'carol', 1, { events: 4 });
    expect(await storedCounts(spaceId)).toEqual({ alice: 3, bob: 1, carol: 1 });
    expect(await eventCountIn(spaceId)).toBe(13);

    expect(await sweepExpiredSessions(t.db, { batchSize: 100 })).toBe(3);

    expect(await sessionIdsIn(spaceId)).toEqual([...aliceLive, ...carolForever].map((k) => k.sessionId).sort());
    expect(await eventCountIn(spaceId)).toBe(6);
    const gone = [...aliceExpired, ...bobExpired].map((k) => k.sessionId);
    const orphans = await t.db.selectFrom('events').select('session_id').where('session_id', 'in', gone).execute();
    expect(orphans).toEqual([]);
    expect(await storedCounts(spaceId)).toEqual({ alice: 1, bob: 0, carol: 1 });

    // The users listing reads the same counters: bob, with no session and no state left, is gone from it.
    const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users` });
    expect(res.statusCode).toBe(200);
    expect(res.json().users.map((u: { userId: string; sessionCount: number }) => [u.userId, u.sessionCount])).toEqual([
      ['alice', 1],
      ['carol', 1],
    ]);
    expect(await sweepExpiredSessions(t.db, { batchSize: 100 })).toBe(0);
  });

  it('sweeps the expired sessions of several accounts in one batch, each account in its own transaction', async () => {
    const other = await createAccount(t.db, `sweep-other-${randomUUID()}`);
    const ours = await insertSpace(t.db, t.account.accountId);
    const theirs = await insertSpace(t.db, other.accountId);
    await seed(ours, 'alice', 2, { expired: true, events: 1 });
    await seed(theirs, 'zoe', 3, { expired: true, events: 2, accountId: other.accountId });
    const [theirLive] = await seed(theirs, 'zoe', 1, { expireIn: '1 hour', accountId: other.accountId });

    expect(await sweepExpiredSessions(t.db, { batchSize: 100 })).toBe(5);

    expect(await sessionIdsIn(ours)).toEqual([]);
    expect(await sessionIdsIn(theirs)).toEqual([theirLive!.sessionId]);
    expect(await eventCountIn(theirs)).toBe(0);
    expect(await storedCounts(ours)).toEqual({ alice: 0 });
    expect(await storedCounts(theirs)).toEqual({ zoe: 1 });
  });

  it('works in bounded batches: 7 expired with batchSize 3 go 3, 3, 1, 0', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    await seed(spaceId, 'u1', 4, { expired: true, events: 1 });
    await seed(spaceId, 'u2', 3, { expired: true });
    const counts = [];
    for (const _ of range(4)) {
      counts.push(await sweepExpiredSessions(t.db, { batchSize: 3 }));
    }
    expect(counts).toEqual([3, 3, 1, 0]);
    expect(await sessionIdsIn(spaceId)).toEqual([]);
    expect(await storedCounts(spaceId)).toEqual({ u1: 0, u2: 0 });
  });

  it('takes the oldest expiry first', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    await seed(spaceId, 'u', 1, { expireIn: '-2 hours' });
    const [newer] = await seed(spaceId, 'u', 1, { expireIn: '-1 hour' });
    expect(await sweepExpiredSessions(t.db, { batchSize: 1 })).toBe(1);
    expect(await sessionIdsIn(spaceId)).toEqual([newer!.sessionId]);
  });

  it('two sweepers on the same database delete every expired session exactly once', { timeout: 60_000 }, async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const users = ['u1', 'u2', 'u3', 'u4', 'u5'];
    for (const user of users) await seed(spaceId, user, 40, { expired: true, events: 1 });
    const [live] = await seed(spaceId, 'u1', 1, { expireIn: '1 hour' });

    // On PostgreSQL the second sweeper has its own pool, as another instance would; PGlite is one
    // connection, so there the two sweepers' transactions simply take turns.
    const other = onPglite
      ? { db: t.db, close: async () => {} }
      : await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 2, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
    try {
      const drain = async (db: Kysely<DB>) => {
        let total = 0;
        for (;;) {
          const removed = await sweepExpiredSessions(db, { batchSize: 7 });
          if (removed === 0) return total;
          total += removed;
        }
      };
      const [first, second] = await Promise.all([drain(t.db), drain(other.db)]);
      expect(first + second).toBe(200);
    } finally {
      await other.close();
    }
    expect(await sessionIdsIn(spaceId)).toEqual([live!.sessionId]);
    expect(await eventCountIn(spaceId)).toBe(0);
    expect(await storedCounts(spaceId)).toEqual({ u1: 1, u2: 0, u3: 0, u4: 0, u5: 0 });
  });

  // PGlite is a single connection: no other transaction can hold a lock while a sweep runs.
  it.skipIf(onPglite)('skips a session whose row is locked right now instead of waiting for it (PostgreSQL: a second connection holds the lock)', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const [busy] = await seed(spaceId, 'u', 2, { expired: true, events: 1 });
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    // An append in flight holds the session row FOR UPDATE (lockSessionForUpdate) until it commits.
    const holder = t.db.transaction().execute(async (trx) => {
      // By its account too, as the service locks rows: Citus runs FOR UPDATE only on one shard.
      await trx.selectFrom('sessions').select('session_id').where('account_id', '=', t.account.accountId).where('session_id', '=', busy!.sessionId).forUpdate().execute();
      locked();
      await released;
    });
    try {
      await isLocked;
      // A sweep that waited for the lock would wait for ever here (the lock goes at `release`).
      const tooSlow = sleep(5_000).then(() => 'waited for the lock');
      expect(await Promise.race([sweepExpiredSessions(t.db, { batchSize: 10 }), tooSlow])).toBe(1);
      expect(await sessionIdsIn(spaceId)).toEqual([busy!.sessionId]);
      expect(await storedCounts(spaceId)).toEqual({ u: 1 });
    } finally {
      release();
      await holder;
    }
    expect(await sweepExpiredSessions(t.db, { batchSize: 10 })).toBe(1);
    expect(await sessionIdsIn(spaceId)).toEqual([]);
    expect(await storedCounts(spaceId)).toEqual({ u: 0 });
  });
});

describe('startExpirySweeper', () => {
  it('sweeps on its timer, repeats full batches up to the cap per tick, and logs only what it removed', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    await seed(spaceId, 'u', 7, { expired: true });
    const logger = captureLogger();
    const sweeper = startExpirySweeper(t.db, { intervalMs: 25, batchSize: 2, maxBatchesPerTick: 2, logger });
    try {
      await until(() => logger.infos.length >= 2, 'two sweeps logged');
      await sleep(150); // several more ticks, which find nothing and so log nothing
    } finally {
      await sweeper.stop();
    }
    expect(logger.infos).toEqual([{ removed: 4 }, { removed: 3 }]);
    expect(logger.errors).toEqual([]);
    expect(await sessionIdsIn(spaceId)).toEqual([]);
  });

  it('stop() waits for the sweep in flight, and no tick runs after it', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    await seed(spaceId, 'u', 1, { expired: true });
    const logger = captureLogger();
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    // Holding the user's counter row keeps the sweep from committing on PostgreSQL; on PGlite
    // the open transaction holds the only connection, so the sweep waits for it instead.
    const holder = t.db.transaction().execute(async (trx) => {
      await trx.selectFrom('space_users').select('user_id').where('account_id', '=', t.account.accountId).where('space_id', '=', spaceId).where('user_id', '=', 'u').forUpdate().execute();
      await released;
    });
    const sweeper = startExpirySweeper(t.db, { intervalMs: 20, batchSize: 10, logger });
    let stopped = false;
    try {
      await sleep(300);
      const stopping = sweeper.stop().then(() => (stopped = true));
      await sleep(200);
      expect(stopped).toBe(false);
      release();
      await holder;
      await stopping;
    } finally {
      release();
      await holder;
    }
    expect(stopped).toBe(true);
    expect(logger.infos).toEqual([{ removed: 1 }]);
    expect(await sessionIdsIn(spaceId)).toEqual([]);

    // Stopped for good: a session expiring now stays until someone else sweeps it.
    await seed(spaceId, 'u', 1, { expired: true });
    await sleep(100);
    expect(await sessionIdsIn(spaceId)).toHaveLength(1);
  });

  it('keeps going without throwing while the database is unreachable, saying so at debug without a stack (the outage is logged once elsewhere)', async () => {
    // A real driver pointed at a port where no database listens.
    const pool = new pg.Pool({ host: '127.0.0.1', port: 1, connectionTimeoutMillis: 500 });
    const unreachable = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    const logger = captureLogger();
    const sweeper = startExpirySweeper(unreachable, { intervalMs: 10, batchSize: 10, logger });
    try {
      await until(() => logger.debugs.length >= 2, 'two skipped sweeps logged');
    } finally {
      await sweeper.stop();
      await unreachable.destroy();
    }
    expect(logger.debugs[0]).toEqual({ fields: { reason: expect.stringContaining('ECONNREFUSED') }, message: 'expiry sweep skipped: the database is unavailable' });
    expect(logger.errors).toEqual([]);
    expect(logger.infos).toEqual([]);
  });

  it.runIf(inject('testBackend').kind === 'postgres')('logs any other failing sweep as an error with its stack, and keeps going (PostgreSQL: a database without the tables)', async () => {
    // A database without the service's tables: "relation does not exist" is the sweep's fault, not an outage.
    const backend = inject('testBackend');
    const pool = new pg.Pool({ connectionString: backend.kind === 'postgres' ? backend.adminUrl : '', max: 1 });
    const withoutTables = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
    const logger = captureLogger();
    const sweeper = startExpirySweeper(withoutTables, { intervalMs: 10, batchSize: 10, logger });
    try {
      await until(() => logger.errors.length >= 2, 'two failed sweeps logged');
    } finally {
      await sweeper.stop();
      await withoutTables.destroy();
    }
    expect(logger.errors[0]).toEqual({ fields: { err: expect.any(Error) }, message: 'expiry sweep failed' });
    expect(logger.debugs).toEqual([]);
  });

  it('does not keep the process alive: its timer is unref\'d', async () => {
    // getActiveResourcesInfo lists only what keeps the event loop alive; counted synchronously
    // around the start, so no other timer can come or go in between.
    const timeouts = () => process.getActiveResourcesInfo().filter((name) => name === 'Timeout').length;
    const before = timeouts();
    const sweeper = startExpirySweeper(t.db, { intervalMs: 60_000, batchSize: 10, logger: captureLogger() });
    const after = timeouts();
    await sweeper.stop();
    expect(after).toBe(before);
  });
});

describe('an expired session', () => {
  it('is a 404 everywhere the moment it expires, before any sweep, and the sweep then removes it', async () => {
    const spaceId = t.account.defaultSpaceId;
    const user = `ttl-${randomUUID()}`;
    const base = `/v1/spaces/${spaceId}/users/${user}/sessions`;
    const created = await t.request({ method: 'POST', url: base, payload: { sessionId: 'short-lived', ttlSeconds: 1 } });
    expect(created.statusCode).toBe(201);
    const url = `${base}/short-lived`;
    const appended = await t.request({ method: 'POST', url: `${url}/events`, payload: { eventId: 'first', author: 'user' } });
    expect(appended.statusCode).toBe(201);
    expect((await t.request({ method: 'GET', url })).statusCode).toBe(200);

    await sleep(1_100);

    const notFound = { error: expect.objectContaining({ code: 'ResourceNotFound.Session' }) };
    const describeRes = await t.request({ method: 'GET', url });
    expect(describeRes.statusCode).toBe(404);
    expect(describeRes.json()).toEqual(notFound);
    const userList = await t.request({ method: 'GET', url: base });
    expect(userList.statusCode).toBe(200);
    expect(userList.json().sessions).toEqual([]);
    const spaceList = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/sessions?userId=${user}&includeTotal=true` });
    expect(spaceList.statusCode).toBe(200);
    expect(spaceList.json().sessions).toEqual([]);
    expect(spaceList.json().totalCount).toBe(0);
    const append = await t.request({ method: 'POST', url: `${url}/events`, payload: { eventId: 'second', author: 'user' } });
    expect(append.statusCode).toBe(404);
    expect(append.json()).toEqual(notFound);
    for (const eventsUrl of [`${url}/events`, `${url}/events/first`]) {
      const res = await t.request({ method: 'GET', url: eventsUrl });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual(notFound);
    }
    const patch = await t.request({ method: 'PATCH', url, payload: { title: 'revived?' } });
    expect(patch.statusCode).toBe(404);
    expect(patch.json()).toEqual(notFound);
    const remove = await t.request({ method: 'DELETE', url });
    expect(remove.statusCode).toBe(404);
    expect(remove.json()).toEqual(notFound);

    // None of those wrote anything: the row and its one event wait for the sweeper.
    const row = await t.db.selectFrom('sessions').selectAll().where('user_id', '=', user).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ title: '', event_count: 1, revision: 2 });
    const events = await t.db.selectFrom('events').select('event_id').where('user_id', '=', user).execute();
    expect(events).toEqual([{ event_id: 'first' }]);
    expect(await storedCounts(spaceId)).toMatchObject({ [user]: 1 });

    expect(await sweepExpiredSessions(t.db, { batchSize: 10 })).toBe(1);
    expect(await t.db.selectFrom('sessions').select('session_id').where('user_id', '=', user).execute()).toEqual([]);
    expect(await t.db.selectFrom('events').select('event_id').where('user_id', '=', user).execute()).toEqual([]);
    expect(await storedCounts(spaceId)).toMatchObject({ [user]: 0 });
  });
});
