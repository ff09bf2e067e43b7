// The verified-credential cache across two instances on one database: B authenticates a known
// credential without a database round trip, and every change made through A (credential deleted or
// disabled, sub-account deleted, policy changed) or straight in the database takes effect on B
// within a second. On PostgreSQL each instance has its own pool and listening connection, as two
// processes would, and B's listener is killed to show that B then stops trusting its cache until
// it listens again. PGlite is one database session: there the two instances share its pool, and
// a notification arrives with the answer to the committing statement.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { listenOnDedicatedClient } from '../../src/db/notifications.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { CREDENTIALS_CHANNEL, type ListeningCredentialCache, startCredentialCache } from '../../src/modules/accounts/credential-cache-listener.js';
import { insertSpace } from '../support/fixtures.js';
import { until } from '../support/poll.js';
import { sleep } from '../support/service-process.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

const backend = inject('testBackend');
const DEADLINE_MS = 1_000;

interface Instance {
  app: FastifyInstance;
  handle: DatabaseHandle;
  cache: ListeningCredentialCache | undefined;
  get(url: string, token: string): Promise<{ status: number; code: string | undefined }>;
}

let database: TestDatabase;
let second: DatabaseHandle | undefined;
// B's listener logs in as a role of its own, so that the test can stop it from reconnecting.
const listenerRole = `ass_listener_${randomBytes(4).toString('hex')}`;
let admin: pg.Client | undefined;
let A: Instance;
let B: Instance;
/** B's database without a cache: what every request costs without one. */
let uncachedB: Instance;
let account: CreatedAccount;
let spaceId: string;
const measured: Record<string, number> = {};

async function instance(handle: DatabaseHandle, cache: ListeningCredentialCache | undefined): Promise<Instance> {
  const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 }, credentialCache: cache });
  await app.ready();
  return {
    app,
    handle,
    cache,
    async get(url, token) {
      const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });
      return { status: res.statusCode, code: res.statusCode >= 400 ? res.json().error.code : undefined };
    },
  };
}

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 5 });
  let listenB = database.listen;
  if (database.kind === 'postgres' && backend.kind === 'postgres') {
    const url = database.pool.options.connectionString!;
    second = await openDatabase({ kind: 'postgres', url, poolMax: 5, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
    admin = new pg.Client({ connectionString: backend.adminUrl });
    await admin.connect();
    await admin.query(`CREATE ROLE "${listenerRole}" LOGIN`);
    const listenerUrl = new URL(url);
    listenerUrl.username = listenerRole;
    listenB = (channel, handlers) =>
      listenOnDedicatedClient(channel, handlers, { client: { connectionString: listenerUrl.toString(), application_name: 'agent-session-service' }, retryMaxMs: 200 });
  }
  const handleB = second ?? database;
  A = await instance(database, startCredentialCache(database.listen, { maxEntries: 100 }));
  B = await instance(handleB, startCredentialCache(listenB, { maxEntries: 100 }));
  uncachedB = await instance(handleB, undefined);
  await until(() => A.cache!.cache.enabled && B.cache!.cache.enabled, 'both instances listen', { intervalMs: 5 });
  account = await createAccount(database.db, `cache-${process.pid}`);
  spaceId = await insertSpace(database.db, account.accountId, 'cached');
});

afterAll(async () => {
  console.log(JSON.stringify({ backend: backend.kind, effectiveOnBAfterAnswerOfAMs: measured }));
  for (const each of [A, B, uncachedB]) await each?.app.close();
  await second?.close();
  await database?.dispose();
  if (admin) {
    await admin.query(`DROP ROLE IF EXISTS "${listenerRole}"`);
    await admin.end();
  }
});

const root = () => account.rootCredential.token;

/** A sub-account (through A's IAM API) allowed everything on the test space, with a credential. */
async function subAccountWithCredential(): Promise<{ subAccountId: string; secretId: string; token: string }> {
  const call = async (method: 'POST' | 'PUT', url: string, payload?: unknown) => {
    const res = await A.app.inject({ method, url, payload: payload as object, headers: { authorization: `Bearer ${root()}` } });
    expect(res.statusCode, res.body).toBeLessThan(300);
    return res.json();
  };
  const { subAccountId } = await call('POST', '/v1/iam/subaccounts', { name: 'agent' });
  await call('PUT', `/v1/iam/subaccounts/${subAccountId}/policy`, { statements: [{ effect: 'allow', actions: ['session:*'], resources: [`space/${spaceId}`] }] });
  const { secretId, token } = await call('POST', `/v1/iam/subaccounts/${subAccountId}/credentials`);
  return { subAccountId, secretId, token };
}

const sessionsUrl = () => `/v1/spaces/${spaceId}/sessions`;

/**
 * Uses the credential on B, which caches it (its first use records last_used_time too). B first
 * applies the changes announced so far (creating the credential announced one): a fill that such a
 * notification overtakes is not stored.
 */
async function cacheOnB(token: string): Promise<void> {
  await B.cache!.catchUp();
  expect(await B.get(sessionsUrl(), token)).toEqual({ status: 200, code: undefined });
  expect(B.cache!.cache.get(token.split('.')[0]!)).toBeDefined();
}

/**
 * Makes the change through A, then polls B until it answers `status` (with error `code`) instead of
 * what it answered before; answers the milliseconds since A's answer.
 */
async function effectiveOnB(change: () => Promise<{ statusCode: number }>, token: string, status: number, code: string | undefined): Promise<number> {
  const before = await B.get(sessionsUrl(), token);
  expect(before.status).not.toBe(status);
  const answer = await change();
  expect(answer.statusCode).toBeLessThan(300);
  const answeredAt = performance.now();
  for (let poll = 1; ; poll++) {
    const res = await B.get(sessionsUrl(), token);
    const elapsed = performance.now() - answeredAt;
    if (res.status === status) {
      expect(res.code).toBe(code);
      // One session: the notification came back with the answer to the committing statement.
      if (backend.kind === 'pglite') expect(poll).toBe(1);
      return elapsed;
    }
    expect(res).toEqual(before);
    if (elapsed > DEADLINE_MS) return elapsed;
    await sleep(2);
  }
}

const onA = (method: 'DELETE' | 'PATCH' | 'PUT', url: string, payload?: unknown) =>
  A.app.inject({ method, url, payload: payload as object, headers: { authorization: `Bearer ${root()}` } });

/** How many times `run` takes a connection from the handle's pool: one per statement outside a transaction. */
async function poolCheckouts(handle: DatabaseHandle, run: () => Promise<unknown>): Promise<number> {
  let checkouts = 0;
  const count = () => void checkouts++;
  handle.pool.on('acquire', count);
  try {
    await run();
  } finally {
    handle.pool.off('acquire', count);
  }
  return checkouts;
}

describe('a credential cached on instance B', () => {
  it('authenticates without a database round trip', async () => {
    const { token } = await subAccountWithCredential();
    await cacheOnB(token);
    const withCache = await poolCheckouts(B.handle, async () => expect((await B.get(sessionsUrl(), token)).status).toBe(200));
    const withoutCache = await poolCheckouts(B.handle, async () => expect((await uncachedB.get(sessionsUrl(), token)).status).toBe(200));
    expect(withoutCache - withCache).toBe(1);
  });

  it.runIf(backend.kind === 'postgres')('keeps authenticating while the credentials table is locked; an uncached one waits (PostgreSQL: a second connection holds the lock)', async () => {
    const { token } = await subAccountWithCredential();
    const fresh = await subAccountWithCredential();
    await cacheOnB(token);
    const locker = new pg.Client({ connectionString: database.pool.options.connectionString });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE credentials IN ACCESS EXCLUSIVE MODE');
      const started = performance.now();
      expect(await B.get(sessionsUrl(), token)).toEqual({ status: 200, code: undefined });
      expect(performance.now() - started).toBeLessThan(500);
      // The control: a credential B has not cached needs the table, and waits for the lock.
      let settled = false;
      const waiting = B.get(sessionsUrl(), fresh.token).finally(() => (settled = true));
      await sleep(300);
      expect(settled).toBe(false);
      await locker.query('COMMIT');
      expect((await waiting).status).toBe(200);
    } finally {
      await locker.end();
    }
  });

  it('answers 401 within a second once A deletes it', async () => {
    const { secretId, token } = await subAccountWithCredential();
    await cacheOnB(token);
    measured.deleteCredential = await effectiveOnB(() => onA('DELETE', `/v1/iam/credentials/${secretId}`), token, 401, 'AuthFailure');
    expect(measured.deleteCredential).toBeLessThan(DEADLINE_MS);
  });

  it('answers 401 within a second once A disables it, and 200 again once A enables it', async () => {
    const { secretId, token } = await subAccountWithCredential();
    await cacheOnB(token);
    measured.disableCredential = await effectiveOnB(() => onA('PATCH', `/v1/iam/credentials/${secretId}`, { status: 'disabled' }), token, 401, 'AuthFailure');
    expect(measured.disableCredential).toBeLessThan(DEADLINE_MS);
    await cacheOnB(root()); // unrelated entries stay usable
    measured.enableCredential = await effectiveOnB(() => onA('PATCH', `/v1/iam/credentials/${secretId}`, { status: 'enabled' }), token, 200, undefined);
    expect(measured.enableCredential).toBeLessThan(DEADLINE_MS);
  });

  it('answers 401 within a second once A deletes its sub-account', async () => {
    const { subAccountId, token } = await subAccountWithCredential();
    await cacheOnB(token);
    measured.deleteSubAccount = await effectiveOnB(() => onA('DELETE', `/v1/iam/subaccounts/${subAccountId}`), token, 401, 'AuthFailure');
    expect(measured.deleteSubAccount).toBeLessThan(DEADLINE_MS);
  });

  it("answers 403 within a second once A changes the sub-account's policy", async () => {
    const { subAccountId, token } = await subAccountWithCredential();
    await cacheOnB(token);
    const elsewhere = { statements: [{ effect: 'allow', actions: ['session:*'], resources: [`space/${await insertSpace(database.db, account.accountId)}`] }] };
    measured.putPolicy = await effectiveOnB(() => onA('PUT', `/v1/iam/subaccounts/${subAccountId}/policy`, elsewhere), token, 403, 'UnauthorizedOperation');
    expect(measured.putPolicy).toBeLessThan(DEADLINE_MS);
  });

  it('answers 401 within a second once its account is deleted in the database', async () => {
    const other = await createAccount(database.db, `cache-doomed-${process.pid}`);
    const token = other.rootCredential.token;
    // B has it cached: the refusal below comes from the invalidation, not from a first read.
    await B.cache!.catchUp();
    expect((await B.get('/v1/spaces', token)).status).toBe(200);
    expect(B.cache!.cache.get(other.rootCredential.secretId)).toBeDefined();
    await database.db.deleteFrom('accounts').where('account_id', '=', other.accountId).execute();
    const since = performance.now();
    await until(async () => (await B.get('/v1/spaces', token)).status === 401, 'B refuses the deleted account', { timeoutMs: DEADLINE_MS, intervalMs: 5 });
    measured.deleteAccountBySql = performance.now() - since;
    expect((await B.get('/v1/spaces', token)).code).toBe('AuthFailure');
  });

  it('stays cached when its use is recorded: last_used_time updates are not announced', async () => {
    const { secretId, token } = await subAccountWithCredential();
    const lastUsed = async () =>
      (await database.db.selectFrom('credentials').select('last_used_time').where('secret_id', '=', secretId).executeTakeFirstOrThrow()).last_used_time;
    expect(await lastUsed()).toBeNull();
    await cacheOnB(token); // the first use wrote last_used_time
    const recorded = await lastUsed();
    expect(recorded).not.toBeNull();
    await B.cache!.catchUp();
    expect(B.cache!.cache.get(secretId)?.last_used_time).not.toBeNull();
    // Within the minute, the cached last use spares the write as well as the read.
    expect(await poolCheckouts(B.handle, () => B.get(sessionsUrl(), token))).toBe(
      (await poolCheckouts(B.handle, () => uncachedB.get(sessionsUrl(), token))) - 1,
    );
    expect(await lastUsed()).toEqual(recorded);
  });
});

describe.runIf(backend.kind === 'postgres')('the triggers (PostgreSQL: a listening client of the test)', () => {
  it('announce credential, principal, policy and account changes, but not a recorded use', async () => {
    const listener = new pg.Client({ connectionString: database.pool.options.connectionString });
    await listener.connect();
    const heard: string[] = [];
    listener.on('notification', (message) => heard.push(message.payload ?? ''));
    await listener.query(`LISTEN ${CREDENTIALS_CHANNEL}`);
    const heardAfter = async (statement: string, params: unknown[] = []) => {
      await listener.query('SELECT 1'); // what earlier statements announced has arrived
      heard.length = 0;
      await database.pool.query(statement, params);
      await listener.query('SELECT 1'); // delivered before this answers
      return heard.map((payload) => JSON.parse(payload));
    };
    try {
      const { subAccountId, secretId } = await subAccountWithCredential();
      expect(await heardAfter(`UPDATE credentials SET last_used_time = now() WHERE secret_id = $1`, [secretId])).toEqual([]);
      expect(await heardAfter(`UPDATE credentials SET status = 'disabled' WHERE secret_id = $1`, [secretId])).toEqual([{ secretId }]);
      expect(await heardAfter(`UPDATE policies SET statements = '[]' WHERE principal_id = $1`, [subAccountId])).toEqual([
        { accountId: account.accountId, principalId: subAccountId },
      ]);
      expect(await heardAfter(`UPDATE accounts SET name = name WHERE account_id = $1`, [account.accountId])).toEqual([{ accountId: account.accountId }]);
      // A cascade announces each row it removes.
      expect(await heardAfter(`DELETE FROM principals WHERE principal_id = $1`, [subAccountId])).toEqual(
        expect.arrayContaining([{ accountId: account.accountId, principalId: subAccountId }, { secretId }]),
      );
    } finally {
      await listener.end();
    }
  });
});

describe.runIf(backend.kind === 'postgres')("B's listening connection lost (PostgreSQL)", () => {
  it('turns the cache off at once, and on again only once listening again', async () => {
    const { secretId, token } = await subAccountWithCredential();
    await cacheOnB(token);
    const pid = B.cache!.listenerPid!;
    const row = await admin!.query(`SELECT usename, application_name FROM pg_stat_activity WHERE pid = $1`, [pid]);
    expect(row.rows).toEqual([{ usename: listenerRole, application_name: 'agent-session-service' }]);

    // Killed, and kept from logging in again: B must not trust what it cached.
    await admin!.query(`ALTER ROLE "${listenerRole}" NOLOGIN`);
    await admin!.query('SELECT pg_terminate_backend($1)', [pid]);
    await until(() => !B.cache!.cache.enabled, "B notices the listener's loss", { timeoutMs: DEADLINE_MS, intervalMs: 5 });
    expect(B.cache!.cache.size).toBe(0);

    // Revoked while B cannot hear it: B answers 401 at once, because it reads the database.
    await database.pool.query(`UPDATE credentials SET status = 'disabled' WHERE secret_id = $1`, [secretId]);
    expect(await B.get(sessionsUrl(), token)).toEqual({ status: 401, code: 'AuthFailure' });
    await sleep(300); // several reconnection attempts fail meanwhile
    expect(B.cache!.cache.enabled).toBe(false);
    expect(B.cache!.listenerPid).toBeUndefined();
    expect(await B.get('/v1/spaces', root())).toMatchObject({ status: 200 });
    expect(B.cache!.cache.size).toBe(0);

    // Allowed to log in again: B listens and caches again (from empty).
    await admin!.query(`ALTER ROLE "${listenerRole}" LOGIN`);
    await until(() => B.cache!.cache.enabled, 'B listens again', { intervalMs: 5 });
    expect(B.cache!.listenerPid).not.toBe(pid);
    expect(B.cache!.cache.get(secretId)).toBeUndefined();
    expect(await B.get(sessionsUrl(), token)).toEqual({ status: 401, code: 'AuthFailure' });
    const other = await subAccountWithCredential();
    await cacheOnB(other.token);
    measured.deleteCredentialAfterReconnect = await effectiveOnB(() => onA('DELETE', `/v1/iam/credentials/${other.secretId}`), other.token, 401, 'AuthFailure');
    expect(measured.deleteCredentialAfterReconnect).toBeLessThan(DEADLINE_MS);
  });
});
