// An append answered 2xx is in the database, whatever its connection went through (issue 19).
//
// The stall that broke it: a statement (BEGIN) answered after the pool's client-side read timeout,
// on a connection that went back to the pool with it still pending, so that the next appends ran
// inside a transaction nobody committed. Reproduced here three ways, each without a crash: a
// PgBouncer whose one server connection is busy queues a BEGIN; a backend stopped (SIGSTOP) past the
// read timeout; a connection changed under the pool as it is handed out (a late BEGIN, or one left
// aborted). Then: 25P02 answers 503, and one locked session holds back only its own appends.
//
// In every case, afterwards: each append answered 2xx is stored at the seq it was answered with, and
// each session's seq is gap-free. PostgreSQL only: PGlite has one connection inside the process,
// no pooler, no backend to stop and no other transaction to hold a lock.
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS, type Limits } from '../../src/config.js';
import { type DatabaseHandle, type DatabaseOptions, openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { type ListeningCredentialCache, startCredentialCache } from '../../src/modules/accounts/credential-cache-listener.js';
import { withDatabase } from '../support/backend.js';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { type PrivateCluster, createPrivateCluster } from '../support/private-cluster.js';
import { type PrivatePgBouncer, startPrivatePgBouncer } from '../support/private-pgbouncer.js';
import { sleep } from '../support/service-process.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';
import { type ClonedDatabase, cloneMigratedDatabase } from '../support/test-database.js';

const backend = inject('testBackend');
const STATEMENT_TIMEOUT_MS = 1_000;
const USER = 'stall-user';

interface Instance {
  app: FastifyInstance;
  handle: DatabaseHandle;
  account: CreatedAccount;
  credentialCache: ListeningCredentialCache;
}

interface Answer {
  sessionId: string;
  status: number;
  code: string | undefined;
  retryAfter: string | undefined;
  seq: number | undefined;
  eventId: string;
}

// As in production, credentials are cached: a request's only statements are then the route's own
// (the first of a PATCH is its BEGIN).
async function startInstance(database: DatabaseOptions, limits: Partial<Limits>): Promise<Instance> {
  const handle = await openDatabase(database);
  const credentialCache = startCredentialCache(handle.listen, { maxEntries: 100 });
  const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, credentialCache, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0, ...limits } });
  await app.ready();
  return { app, handle, credentialCache, account: await createAccount(handle.db, `stall-${randomUUID()}`) };
}

async function stopInstance(instance: Instance | undefined): Promise<void> {
  await instance?.app.close(); // closes the credential cache's listener too
  await instance?.handle.close();
}

const sessionsUrl = ({ account }: Instance) => `/v1/spaces/${account.defaultSpaceId}/users/${USER}/sessions`;
const auth = ({ account }: Instance) => ({ authorization: `Bearer ${account.rootCredential.token}` });

async function createSession(instance: Instance): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  const res = await instance.app.inject({ method: 'POST', url: sessionsUrl(instance), headers: auth(instance), payload: { sessionId } });
  expect(res.statusCode).toBe(201);
  return sessionId;
}

async function append(instance: Instance, sessionId: string): Promise<Answer> {
  const eventId = randomUUID();
  const res = await instance.app.inject({
    method: 'POST',
    url: `${sessionsUrl(instance)}/${sessionId}/events`,
    headers: auth(instance),
    payload: { eventId, author: 'user', actions: { stateDelta: { [eventId]: true } } },
  });
  const body = res.json();
  const retryAfter = res.headers['retry-after'];
  return { sessionId, eventId, status: res.statusCode, code: body.error?.code, retryAfter: typeof retryAfter === 'string' ? retryAfter : undefined, seq: body.events?.[0]?.seq };
}

const modify = (instance: Instance, sessionId: string) =>
  instance.app.inject({ method: 'PATCH', url: `${sessionsUrl(instance)}/${sessionId}`, headers: auth(instance), payload: { title: 'renamed' } });

async function batchCounts(app: FastifyInstance): Promise<{ batches: number; batchedAppends: number; reruns: number }> {
  const samples = parsePrometheusText((await app.inject({ method: 'GET', url: '/metrics' })).body);
  const read = (name: string) => sampleValue(samples, name);
  return { batches: read('append_batches_total'), batchedAppends: read('append_batched_appends_total'), reruns: read('append_batch_reruns_total') };
}

/**
 * Every 2xx append is stored, at its acknowledged seq, with its state key; each session's seqs are
 * 1..n. Read on a connection of its own, after the instance has closed its pool (so anything an
 * uncommitted transaction held is gone).
 */
async function expectEveryAcknowledgedAppendStored(url: string, accountId: string, answers: Answer[]): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (const sessionId of new Set(answers.map((answer) => answer.sessionId))) {
      const { rows: events } = await client.query<{ seq: string; event_id: string }>(
        'SELECT seq, event_id FROM events WHERE account_id = $1 AND session_id = $2 ORDER BY seq',
        [accountId, sessionId],
      );
      expect(events.map((event) => Number(event.seq))).toEqual(events.map((_, i) => i + 1));
      const stored = new Map(events.map((event) => [event.event_id, Number(event.seq)]));
      const { rows: sessions } = await client.query<{ state: Record<string, unknown>; event_count: string }>(
        'SELECT state, event_count FROM sessions WHERE account_id = $1 AND session_id = $2',
        [accountId, sessionId],
      );
      expect(Number(sessions[0]!.event_count)).toBe(events.length);
      for (const answer of answers.filter((a) => a.sessionId === sessionId && a.status >= 200 && a.status < 300)) {
        expect(stored.get(answer.eventId), `acknowledged append ${answer.eventId} (seq ${answer.seq})`).toBe(answer.seq);
        expect(sessions[0]!.state[answer.eventId]).toBe(true);
      }
    }
  } finally {
    await client.end();
  }
}

/** Refusals must say "retry": 503 ResourceUnavailable.Database with Retry-After, never a 500. */
function expectOnlyStoredOrRetry(answers: Answer[]): void {
  for (const answer of answers) {
    if (answer.status === 201) continue;
    expect({ status: answer.status, code: answer.code }).toEqual({ status: 503, code: 'ResourceUnavailable.Database' });
    expect(answer.retryAfter).toBeDefined();
  }
}

describe.runIf(backend.kind === 'postgres')('an append answered 2xx is committed, whatever its connection went through (PostgreSQL)', () => {
  const adminUrl = backend.kind === 'postgres' ? backend.adminUrl : 'postgres://unused';
  const databases: ClonedDatabase[] = [];

  /** A migrated database of the test's own; the name, as the tests hand it to PgBouncer. */
  async function newDatabase(): Promise<string> {
    const database = await cloneMigratedDatabase('ass_stall');
    databases.push(database);
    return database.name;
  }

  afterAll(async () => {
    for (const database of databases) await database.drop();
  });

  it('a BEGIN queued by PgBouncer past the read timeout does not leave the next appends in an uncommitted transaction', { timeout: 60_000 }, async () => {
    const database = await newDatabase();
    const directUrl = withDatabase(adminUrl, database);
    // One server connection: while another client's transaction holds it, everything else queues.
    const bouncer: PrivatePgBouncer = await startPrivatePgBouncer({ upstream: adminUrl, poolSize: 1, connectQuery: `SET statement_timeout = ${STATEMENT_TIMEOUT_MS}; SET idle_in_transaction_session_timeout = ${STATEMENT_TIMEOUT_MS}` });
    let instance: Instance | undefined;
    const holder = new pg.Client({ connectionString: bouncer.url(database) });
    try {
      instance = await startInstance(
        { kind: 'postgres', url: bouncer.url(database), directUrl, poolMax: 4, statementTimeoutMs: STATEMENT_TIMEOUT_MS, connectTimeoutMs: 5_000 },
        { appendBatchConcurrency: 2 },
      );
      const sessions = await Promise.all([1, 2].map(() => createSession(instance!)));
      await holder.connect();
      const held = holder.query('BEGIN; SET LOCAL statement_timeout = 0; SELECT pg_sleep(5); COMMIT');
      await sleep(300);

      // Its BEGIN waits in PgBouncer's queue longer than the read timeout.
      const patched = await modify(instance, sessions[0]!);
      expect(patched.statusCode).toBe(503);
      expect(patched.json().error.code).toBe('ResourceUnavailable.Database');

      // One after another, as an agent's turns come.
      const during: Answer[] = [];
      for (let i = 0; i < 7; i++) during.push(await append(instance, sessions[i % 2]!));
      await held;
      const after = await Promise.all(Array.from({ length: 4 }, (_, i) => append(instance!, sessions[i % 2]!)));
      // Once the pooler's connection is free again, appends are stored at once.
      expect(after.map((answer) => answer.status)).toEqual([201, 201, 201, 201]);
      const answers = [...during, ...after];
      console.log('DEBUG', patched.statusCode, answers.map((a) => a.status + ':' + a.seq).join(' '));
      expectOnlyStoredOrRetry(answers);
      const { accountId } = instance.account;
      await stopInstance(instance);
      instance = undefined;
      await expectEveryAcknowledgedAppendStored(directUrl, accountId, answers);
    } finally {
      await holder.end().catch(() => {});
      await stopInstance(instance);
      await bouncer.remove();
    }
  });

  describe('on a private cluster', () => {
    let cluster: PrivateCluster;
    beforeAll(async () => {
      cluster = await createPrivateCluster();
      await cluster.start();
      const handle = await openDatabase({ kind: 'postgres', url: cluster.url(), poolMax: 1, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
      await migrateToLatest(handle.db);
      await handle.close();
    }, 120_000);
    afterAll(async () => cluster?.remove());

    it('a backend stopped past the read timeout does not leave its connection to the next appends', { timeout: 60_000 }, async () => {
      // One pooled connection, so the stopped backend's connection is the one every request would get.
      const instance = await startInstance(
        { kind: 'postgres', url: cluster.url(), poolMax: 1, statementTimeoutMs: STATEMENT_TIMEOUT_MS, connectTimeoutMs: 3_000 },
        { appendBatchConcurrency: 1 },
      );
      let stopped: number | undefined;
      try {
        const sessions = await Promise.all([1, 2, 3].map(() => createSession(instance)));
        // The pool's one connection; the credential cache listens on a connection of its own.
        const pids = (await servicePids(cluster.url())).filter((pid) => pid !== instance.credentialCache.listenerPid);
        expect(pids).toHaveLength(1);
        stopped = pids[0]!;
        process.kill(stopped, 'SIGSTOP');
        const patched = await modify(instance, sessions[0]!);
        expect(patched.statusCode).toBe(503);
        await sleep(1_000); // the read timeout + 1 s after the stop, as in the report
        process.kill(stopped, 'SIGCONT');
        stopped = undefined;
        await sleep(200); // the late BEGIN is answered now

        // Appends arriving together: the first goes alone, the rest as one batch.
        const answers = await Promise.all(Array.from({ length: 9 }, (_, i) => append(instance, sessions[i % 3]!)));
        expectOnlyStoredOrRetry(answers);
        expect(answers.filter((answer) => answer.status === 201).length).toBeGreaterThan(0);
        // Past the idle-in-transaction timeout that ended the old connection's stale transaction.
        await sleep(STATEMENT_TIMEOUT_MS + 500);
        await stopInstance(instance);
        await expectEveryAcknowledgedAppendStored(cluster.url(), instance.account.accountId, answers);
      } finally {
        if (stopped !== undefined) process.kill(stopped, 'SIGCONT');
        await stopInstance(instance).catch(() => {});
      }
    });
    it('logs a database outage as one warning when it starts and one line when it ends, with the count of requests refused; each refusal at debug, without a stack', { timeout: 90_000 }, async () => {
      const lines: Record<string, unknown>[] = [];
      const stream = new Writable({
        write(chunk: Buffer, _encoding, done) {
          for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>);
          done();
        },
      });
      const handle = await openDatabase({ kind: 'postgres', url: cluster.url(), poolMax: 2, statementTimeoutMs: STATEMENT_TIMEOUT_MS, connectTimeoutMs: 1_000 });
      const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 }, logger: pino({ level: 'debug' }, stream) });
      try {
        const account = await createAccount(handle.db, `outage-${randomUUID()}`);
        const url = `/v1/spaces/${account.defaultSpaceId}/users/${USER}/sessions`;
        const headers = { authorization: `Bearer ${account.rootCredential.token}` };
        expect((await app.inject({ method: 'GET', url, headers })).statusCode).toBe(200);
        await cluster.stopImmediate();
        let refused = 0;
        for (let i = 0; i < 12; i++) {
          const res = await app.inject({ method: 'GET', url, headers });
          expect(res.statusCode).toBe(503);
          refused++;
          await sleep(100);
        }
        await cluster.start();
        const back = async () => lines.find((line) => line.msg === 'database available again');
        for (let waited = 0; !(await back()) && waited < 20_000; waited += 200) await sleep(200);
        expect(await back()).toMatchObject({ level: 30, refusedRequests: refused });
        const outageLines = lines.filter((line) => (line.level as number) >= 40);
        expect(outageLines.map((line) => line.msg)).toEqual(['database unavailable: requests are answered 503 until it is back']);
        const perRequest = lines.filter((line) => line.msg === 'request refused: database unavailable');
        expect(perRequest).toHaveLength(refused);
        expect(perRequest.every((line) => line.level === 20 && line.err === undefined)).toBe(true);
        expect((await app.inject({ method: 'GET', url, headers })).statusCode).toBe(200);
      } finally {
        await app.close();
        await handle.close();
      }
    });
  });

  describe('a connection changed under the pool as it is handed out', () => {
    let database: string;
    let url: string;
    beforeAll(async () => {
      database = await newDatabase();
      url = withDatabase(adminUrl, database);
    });

    /**
     * The connection that is about to run `statement` is found inside a transaction first: one whose
     * BEGIN was answered late ('open'), or one left aborted ('aborted': every statement then fails
     * with 25P02). The spoiling statement runs on that connection just before the instance's own.
     */
    function spoilConnectionBefore(handle: DatabaseHandle, statement: RegExp, how: 'open' | 'aborted'): void {
      const onAcquire = (client: pg.PoolClient) => {
        const query = client.query;
        const spoiling = (...args: unknown[]) => {
          client.query = query;
          const first = args[0] as string | { text?: string };
          const text = typeof first === 'string' ? first : (first.text ?? '');
          if (!statement.test(text)) return (query as (...a: unknown[]) => unknown).apply(client, args);
          handle.pool.off('acquire', onAcquire);
          const spoil = client.query(how === 'open' ? 'BEGIN' : 'BEGIN; SELECT 1/0').catch(() => {});
          return spoil.then(() => (query as (...a: unknown[]) => unknown).apply(client, args));
        };
        client.query = spoiling as typeof client.query;
      };
      handle.pool.on('acquire', onAcquire);
    }

    async function withInstance(limits: Partial<Limits>, run: (instance: Instance) => Promise<Answer[]>): Promise<void> {
      const instance = await startInstance({ kind: 'postgres', url, poolMax: 1, statementTimeoutMs: STATEMENT_TIMEOUT_MS, connectTimeoutMs: 3_000 }, limits);
      let answers: Answer[];
      try {
        answers = await run(instance);
      } finally {
        await stopInstance(instance);
      }
      expectOnlyStoredOrRetry(answers);
      await expectEveryAcknowledgedAppendStored(url, instance.account.accountId, answers);
    }

    for (const how of ['open', 'aborted'] as const) {
      it(`a batch that gets a connection ${how === 'open' ? 'inside an open' : 'inside an aborted'} transaction runs its appends again alone on a healthy one`, { timeout: 30_000 }, async () => {
        await withInstance({ appendBatchConcurrency: 1 }, async (instance) => {
          const [lockedSession, ...free] = await Promise.all(Array.from({ length: 7 }, () => createSession(instance)));
          // The batch slot is held by an append waiting for a session another transaction locked,
          // so the appends after it queue and go out together once it is done.
          const holder = new pg.Client({ connectionString: url });
          await holder.connect();
          await holder.query('BEGIN');
          await holder.query('SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE', [lockedSession]);
          const first = append(instance, lockedSession!);
          await sleep(200);
          const before = await batchCounts(instance.app);
          spoilConnectionBefore(instance.handle, /append_events_batch/, how);
          const batched = free.map((sessionId) => append(instance, sessionId));
          await sleep(100);
          await holder.query('ROLLBACK');
          await holder.end();
          const answers = [await first, ...(await Promise.all(batched))];
          expect(answers.map((answer) => [answer.status, answer.code])).toEqual(answers.map(() => [201, undefined]));
          const after = await batchCounts(instance.app);
          // One batch met the spoiled connection, and every append it carried was run again alone.
          expect(after.batches - before.batches).toBe(1);
          expect(after.batchedAppends - before.batchedAppends).toBeGreaterThanOrEqual(2);
          expect(after.reruns - before.reruns).toBe(after.batchedAppends - before.batchedAppends);
          return answers;
        });
      });
    }

    it('an append alone on a connection inside an open transaction is answered 503, not acknowledged, and the next one is stored', { timeout: 30_000 }, async () => {
      await withInstance({ appendBatchConcurrency: 1 }, async (instance) => {
        const sessionId = await createSession(instance);
        spoilConnectionBefore(instance.handle, /append_events\(/, 'open');
        const refused = await append(instance, sessionId);
        expect([refused.status, refused.code]).toEqual([503, 'ResourceUnavailable.Database']);
        const next = await append(instance, sessionId);
        expect([next.status, next.seq]).toEqual([201, 1]);
        return [refused, next];
      });
    });

    it('answers 25P02 (a connection left in an aborted transaction) with 503 and Retry-After, and does not use that connection again', { timeout: 30_000 }, async () => {
      await withInstance({}, async (instance) => {
        const sessionId = await createSession(instance);
        const describe = () => instance.app.inject({ method: 'GET', url: `${sessionsUrl(instance)}/${sessionId}`, headers: auth(instance) });
        spoilConnectionBefore(instance.handle, /FROM sessions AS s\b/, 'aborted');
        const refused = await describe();
        expect(refused.statusCode).toBe(503);
        expect(refused.json().error.code).toBe('ResourceUnavailable.Database');
        expect(refused.headers['retry-after']).toBeDefined();
        expect((await describe()).statusCode).toBe(200);
        spoilConnectionBefore(instance.handle, /append_events\(/, 'aborted');
        const appendRefused = await append(instance, sessionId);
        expect([appendRefused.status, appendRefused.code]).toEqual([503, 'ResourceUnavailable.Database']);
        const stored = await append(instance, sessionId);
        expect([stored.status, stored.seq]).toEqual([201, 1]);
        return [appendRefused, stored];
      });
    });
  });

  it('one session locked for 8 s holds back only its own appends: the others keep at least 80% of their rate', { timeout: 90_000 }, async () => {
    const database = await newDatabase();
    const url = withDatabase(adminUrl, database);
    const options: DatabaseOptions = { kind: 'postgres', url, poolMax: 10, statementTimeoutMs: 2_000, connectTimeoutMs: 5_000 };
    const limits = { appendBatchConcurrency: 2, appendSessionQueueWaitMs: 2_000 };
    // The instance under test, and a control instance beside it on the same database and machine
    // with the same load and no locked session. The rate that counts is the tested instance's
    // relative to the control's at the same moment, so the shared machine's changing speed (2× from
    // one minute to the next here) cancels out; the lock's effect does not.
    const tested = await startInstance(options, limits);
    const control = await startInstance(options, limits);
    const answers: Answer[] = [];
    try {
      const [lockedSession, ...others] = await Promise.all(Array.from({ length: 17 }, () => createSession(tested)));
      const controlSessions = await Promise.all(Array.from({ length: 16 }, () => createSession(control)));
      type Phase = 'warm-up' | 'before' | 'locked' | 'after' | 'done';
      let phase: Phase = 'warm-up';
      const zero = () => ({ 'warm-up': 0, before: 0, locked: 0, after: 0, done: 0 });
      const counted = { tested: zero(), control: zero() };
      // Closed loops: one client per session; two more on the locked session, not counted.
      const loop = async (instance: Instance, sessionId: string, count?: Record<Phase, number>) => {
        while (phase !== 'done') {
          const at = phase;
          const answer = await append(instance, sessionId);
          if (instance === tested) answers.push(answer);
          if (count && answer.status === 201 && at === (phase as Phase)) count[at]++;
        }
      };
      const loops = [
        ...others.map((sessionId) => loop(tested, sessionId, counted.tested)),
        ...controlSessions.map((sessionId) => loop(control, sessionId, counted.control)),
        loop(tested, lockedSession!),
        loop(tested, lockedSession!),
      ];
      await sleep(1_000);
      phase = 'before';
      await sleep(4_000);
      const holder = new pg.Client({ connectionString: url });
      await holder.connect();
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE session_id = $1 FOR UPDATE', [lockedSession]);
      phase = 'locked';
      await sleep(8_000);
      await holder.query('ROLLBACK');
      await holder.end();
      phase = 'after';
      await sleep(4_000);
      phase = 'done';
      await Promise.all(loops);
      const share = (at: Phase[]) => {
        const sum = (count: Record<Phase, number>) => at.reduce((total, p) => total + count[p], 0);
        return sum(counted.tested) / sum(counted.control);
      };
      const quiet = share(['before', 'after']);
      const locked = share(['locked']);
      console.log(
        `other sessions' appends, tested instance ÷ control instance: ${quiet.toFixed(2)} quiet, ${locked.toFixed(2)} while one session was locked ` +
          `(${(locked / quiet).toFixed(2)} of the quiet rate; counts ${JSON.stringify(counted)})`,
      );
      expect(locked / quiet).toBeGreaterThanOrEqual(0.8);
      // The locked session's appends were refused with "retry", none acknowledged without being stored.
      expectOnlyStoredOrRetry(answers);
      expect(answers.filter((answer) => answer.sessionId !== lockedSession).every((answer) => answer.status === 201)).toBe(true);
    } finally {
      await stopInstance(tested);
      await stopInstance(control);
    }
    await expectEveryAcknowledgedAppendStored(url, tested.account.accountId, answers);
  });
});

/** The backend pids of the service's pooled connections on a server. */
async function servicePids(url: string): Promise<number[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ pid: number }>(
      "SELECT pid FROM pg_stat_activity WHERE application_name = 'agent-session-service' AND pid <> pg_backend_pid()",
    );
    return rows.map((row) => row.pid);
  } finally {
    await client.end();
  }
}
