// One worker stops (as in a crash): the accounts whose shards are on the other worker keep working,
// those on the stopped one are answered 503 ResourceUnavailable.Database with Retry-After (never a
// 500), and every account works again once the worker is back. A cluster of its own, since stopping
// a worker of the shared one would fail the other files' tests.
import { fileURLToPath } from 'node:url';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { type PrivateCitus, startPrivateCitus } from '../support/private-citus.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';
import type { FastifyInstance } from 'fastify';

const DISTRIBUTE_SQL = fileURLToPath(new URL('../../deploy/citus/distribute.sql', import.meta.url));

let citus: PrivateCitus;
let handle: DatabaseHandle;
let app: FastifyInstance;

beforeAll(async () => {
  citus = await startPrivateCitus();
  await citus.createDatabase('outage');
  handle = await openDatabase({ kind: 'postgres', url: citus.coordinator.url('outage'), poolMax: 8, statementTimeoutMs: 10_000, connectTimeoutMs: 2_000 });
  await migrateToLatest(handle.db);
  await citus.psqlFile('outage', DISTRIBUTE_SQL);
  app = await buildApp({ db: handle.db, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 }, pageTokenKey: TEST_PAGE_TOKEN_KEY, logger: false });
});
afterAll(async () => {
  await app?.close();
  await handle?.close();
  await citus?.remove();
});

const nodePortOf = async (accountId: string) =>
  (
    await sql<{ nodeport: number }>`
      SELECT nodeport FROM citus_shards
      WHERE shardid = get_shard_id_for_distribution_column('sessions', ${accountId}::text) AND table_name = 'sessions'::regclass`.execute(handle.db)
  ).rows[0]!.nodeport;

const append = (account: CreatedAccount, payload: object = { author: 'user' }) =>
  app.inject({
    method: 'POST',
    url: `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions/s1/events`,
    headers: { authorization: `Bearer ${account.rootCredential.token}` },
    payload,
  });

describe('a worker stopped and started again', () => {
  it('503 with Retry-After for the accounts on it, the others unaffected, all back once it is', async () => {
    const [worker1, worker2] = citus.workers as [typeof citus.coordinator, typeof citus.coordinator];
    // Accounts until there is one whose shard is on each worker.
    const byWorker = new Map<number, CreatedAccount>();
    for (let i = 0; byWorker.size < 2 && i < 40; i++) {
      const account = await createAccount(handle.db, `outage-${i}`);
      const port = await nodePortOf(account.accountId);
      if (!byWorker.has(port)) byWorker.set(port, account);
    }
    const onStopped = byWorker.get(worker2.port)!;
    const onRunning = byWorker.get(worker1.port)!;
    for (const account of [onStopped, onRunning]) {
      const created = await app.inject({
        method: 'POST',
        url: `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions`,
        headers: { authorization: `Bearer ${account.rootCredential.token}` },
        payload: { sessionId: 's1' },
      });
      expect(created.statusCode).toBe(201);
      expect((await append(account)).statusCode).toBe(201);
    }

    await worker2.stopImmediate();
    try {
      for (let round = 0; round < 3; round++) {
        const running = await append(onRunning);
        expect(running.statusCode).toBe(201);
        const stopped = await append(onStopped);
        expect(stopped.statusCode, stopped.body).toBe(503);
        expect(stopped.json().error.code).toBe('ResourceUnavailable.Database');
        expect(stopped.headers['retry-after']).toMatch(/^\d+$/);
        // A read of the stopped worker's account is refused the same way.
        const read = await app.inject({
          method: 'GET',
          url: `/v1/spaces/${onStopped.defaultSpaceId}/users/u1/sessions/s1`,
          headers: { authorization: `Bearer ${onStopped.rootCredential.token}` },
        });
        expect(read.statusCode, read.body).toBe(503);
      }
    } finally {
      await worker2.start();
    }

    // Back: the stopped worker's account appends again (the first tries may meet connections Citus
    // has not yet found dead), the other never stopped.
    const deadline = Date.now() + 20_000;
    let recovered = await append(onStopped);
    while (recovered.statusCode !== 201 && Date.now() < deadline) {
      expect(recovered.statusCode, recovered.body).toBe(503);
      await new Promise((resolve) => setTimeout(resolve, 200));
      recovered = await append(onStopped);
    }
    expect(recovered.statusCode).toBe(201);
    expect((await append(onRunning)).statusCode).toBe(201);
    const counts = await handle.db.selectFrom('sessions').select(['account_id', 'event_count']).where('session_id', '=', 's1').execute();
    expect(Object.fromEntries(counts.map((row) => [row.account_id, row.event_count]))).toEqual({ [onStopped.accountId]: 2, [onRunning.accountId]: 5 });
  });
});
