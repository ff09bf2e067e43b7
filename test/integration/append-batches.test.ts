// Group commit of appends (src/modules/events/append-batcher.ts, migrations/0007): appends that
// arrive while the instance's append call is out go to the database together, and each is still
// answered, and written or not, exactly as it would have been alone.
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { FastifyInstance } from 'fastify';
import { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { openDatabase } from '../../src/db/connect.js';
import { createAccountSlots } from '../../src/lib/account-slots.js';
import { batchingOptions, createAppendBatcher } from '../../src/modules/events/append-batcher.js';
import { type BatchedAppend, appendBatchInDatabase } from '../../src/modules/events/append.repository.js';
import type { JsonObject } from '../../src/db/schema.js';
import { insertSession } from '../support/fixtures.js';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { TEST_PAGE_TOKEN_KEY, createTestApp, type TestApp } from '../support/test-app.js';

// One append call out at a time: whatever arrives meanwhile waits and forms the next batch.
const LIMITS = { stateBytes: 1024, appendBatchConcurrency: 1, appendBatchMax: 32 };

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ limits: LIMITS });
});
afterAll(async () => t.close());

const USER = 'user-batch';

async function newSession(state: JsonObject = {}): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId }, { state });
  return sessionId;
}

const eventsUrl = (sessionId: string) => `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}/events`;

const append = (sessionId: string, payload: object, headers: Record<string, string> = {}) =>
  t.request({ method: 'POST', url: eventsUrl(sessionId), payload, headers });

/** The batcher's counters as /metrics reports them. */
async function batchCounts(app: FastifyInstance = t.app) {
  const samples = parsePrometheusText((await app.inject({ method: 'GET', url: '/metrics' })).body);
  const read = (name: string, labels: Record<string, string> = {}) => sampleValue(samples, name, labels);
  return {
    batches: read('append_batches_total'),
    batchedAppends: read('append_batched_appends_total'),
    refusedWhole: read('append_batches_refused_whole_total'),
    reruns: read('append_batch_reruns_total'),
    aloneForSharedState: read('append_sent_alone_total', { reason: 'shared_state' }),
    aloneForLargeDelta: read('append_sent_alone_total', { reason: 'large_delta' }),
    calls: read('append_batch_calls_total'),
    callSeconds: read('append_batch_call_seconds_total'),
  };
}

/**
 * Resolves once the app's batcher shows this queue on /metrics: a test's appends sent with inject
 * reach it only after their request's own steps, which a busy machine can hold for longer than any
 * fixed pause.
 */
async function untilQueue(app: FastifyInstance, expected: { callsOut: number; waiting: number }) {
  let seen: { callsOut: number; waiting: number } | undefined;
  for (let attempt = 0; attempt < 400; attempt++) {
    const samples = parsePrometheusText((await app.inject({ method: 'GET', url: '/metrics' })).body);
    seen = { callsOut: sampleValue(samples, 'append_batch_calls_out', {}), waiting: sampleValue(samples, 'append_batch_waiting', {}) };
    if (seen.callsOut === expected.callsOut && seen.waiting === expected.waiting) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  expect(seen).toEqual(expected);
}

async function snapshot(sessionId: string) {
  const session = await t.db.selectFrom('sessions').selectAll().where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).executeTakeFirst();
  const events = await t.db.selectFrom('events').selectAll().where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).orderBy('seq').execute();
  return { session, events };
}

describe('group commit of appends', () => {
  it('sends appends that arrive together in one call, and each gets its own gap-free seq and delta', async () => {
    const sessions = await Promise.all(Array.from({ length: 20 }, () => newSession({ kept: true })));
    const before = await batchCounts();
    const started = performance.now();
    const requests = sessions.flatMap((sessionId) =>
      [1, 2, 3].map((turn) => append(sessionId, { eventId: `${sessionId}-${turn}`, author: 'user', actions: { stateDelta: { [`turn${turn}`]: turn } } })),
    );
    const responses = await Promise.all(requests);
    const elapsedSeconds = (performance.now() - started) / 1000;
    expect(responses.map((res) => res.statusCode)).toEqual(responses.map(() => 201));

    const after = await batchCounts();
    expect(after.batches).toBeGreaterThan(before.batches);
    expect(after.batchedAppends - before.batchedAppends).toBeGreaterThanOrEqual(2);
    expect(after.reruns).toBe(before.reruns);
    // Nothing to refuse: every batch was written whole, by append_events_batch_whole().
    expect(after.refusedWhole).toBe(before.refusedWhole);
    // Every append went out in a call of the slots: each batch is one, each append outside a batch another.
    const appendsAlone = requests.length - (after.batchedAppends - before.batchedAppends);
    expect(after.calls - before.calls).toBe(after.batches - before.batches + appendsAlone);
    // One call out at a time (LIMITS): their times add up to no more than the appends took in all.
    expect(after.callSeconds - before.callSeconds).toBeGreaterThan(0);
    expect(after.callSeconds - before.callSeconds).toBeLessThanOrEqual(elapsedSeconds);

    for (const sessionId of sessions) {
      const { session, events } = await snapshot(sessionId);
      expect(events.map((event) => Number(event.seq))).toEqual([1, 2, 3]);
      expect(events.map((event) => event.event_id).sort()).toEqual([1, 2, 3].map((turn) => `${sessionId}-${turn}`));
      expect(session).toMatchObject({ state: { kept: true, turn1: 1, turn2: 2, turn3: 3 }, event_count: 3, revision: 4 });
    }
    // Each answer is its own append's: its session's seq, and the session as that append left it.
    for (const res of responses) {
      const body = res.json();
      expect(body.events[0].seq).toBe(body.session.eventCount);
      expect(body.session.state).toMatchObject({ [`turn${body.events[0].eventId.split('-').pop()}`]: Number(body.events[0].eventId.split('-').pop()) });
    }
  });

  it('answers each append of a batch as if it had been alone, and the refused ones write nothing', async () => {
    const good = await Promise.all(Array.from({ length: 8 }, () => newSession()));
    const stale = await newSession();
    const replayed = await newSession();
    const storedEvent = { eventId: 'evt-stored', author: 'user', actions: { stateDelta: { a: 1 } } };
    expect((await append(replayed, storedEvent)).statusCode).toBe(201);
    const conflicting = await newSession();
    expect((await append(conflicting, storedEvent)).statusCode).toBe(201);
    const full = await newSession({ big: 'x'.repeat(900) });
    const missing = `s-${randomUUID()}`;
    const refused = [stale, replayed, conflicting, full, missing];
    const snapshots = await Promise.all(refused.map(snapshot));
    const before = await batchCounts();

    const [goodAnswers, staleAnswer, replayAnswer, conflictAnswer, fullAnswer, missingAnswer] = await Promise.all([
      // Every other one names the current revision in If-Match, which holds in a batch as alone.
      Promise.all(good.map((sessionId, i) => append(sessionId, { author: 'user', actions: { stateDelta: { ok: true } } }, i % 2 ? { 'if-match': '"1"' } : {}))),
      append(stale, { author: 'user' }, { 'if-match': '"7"' }),
      append(replayed, storedEvent),
      append(conflicting, { ...storedEvent, actions: { stateDelta: { a: 2 } } }),
      append(full, { author: 'user', actions: { stateDelta: { more: 'y'.repeat(200) } } }),
      append(missing, { author: 'user' }),
    ]);

    expect(goodAnswers.map((res) => res.statusCode)).toEqual(good.map(() => 201));
    expect(goodAnswers.map((res) => res.json().session.state)).toEqual(good.map(() => ({ ok: true })));
    expect(staleAnswer.statusCode).toBe(412);
    expect(staleAnswer.json().error).toMatchObject({ code: 'FailedOperation.PreconditionFailed', details: { currentRevision: 1 } });
    expect(replayAnswer.statusCode).toBe(200);
    expect(replayAnswer.json().events).toMatchObject([{ seq: 1, eventId: 'evt-stored' }]);
    expect(conflictAnswer.statusCode).toBe(409);
    expect(conflictAnswer.json().error).toMatchObject({ code: 'InvalidParameter.EventIdDuplicate', details: { eventId: 'evt-stored' } });
    expect(fullAnswer.statusCode).toBe(413);
    expect(fullAnswer.json().error.code).toBe('LimitExceeded.State');
    expect(missingAnswer.statusCode).toBe(404);
    expect(missingAnswer.json().error.code).toBe('ResourceNotFound.Session');

    expect(await Promise.all(refused.map(snapshot))).toEqual(snapshots);
    const after = await batchCounts();
    expect(after.batchedAppends - before.batchedAppends).toBeGreaterThanOrEqual(2);
    // The refused appends that were in a batch were run again alone; how many were depends on timing.
    expect(after.reruns - before.reruns).toBeGreaterThanOrEqual(1);
    expect(after.reruns - before.reruns).toBeLessThanOrEqual(refused.length);
  });

  it('sends an append with a large delta alone, outside every batch, while the small ones around it are batched', async () => {
    const app = await buildApp({
      db: t.db,
      pageTokenKey: TEST_PAGE_TOKEN_KEY,
      limits: { ...DEFAULT_LIMITS, ...LIMITS, stateBytes: 64 * 1024, rateLimitMax: 0, appendAloneDeltaBytes: 1024, listConcurrency: 2, expensivePerAccount: 1 },
    });
    try {
      const heavy = await Promise.all([1, 2, 3].map(() => newSession()));
      const light = await Promise.all([1, 2, 3, 4, 5, 6].map(() => newSession()));
      const before = await batchCounts(app);
      const post = (sessionId: string, stateDelta: object) =>
        app.inject({ method: 'POST', url: eventsUrl(sessionId), headers: { authorization: `Bearer ${t.account.rootCredential.token}` }, payload: { author: 'user', actions: { stateDelta } } });
      const big = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`key${i}`, 'x'.repeat(20)]));
      const answers = await Promise.all([...heavy.map((sessionId) => post(sessionId, big)), ...light.map((sessionId) => post(sessionId, { small: 1 }))]);
      expect(answers.map((res) => res.statusCode)).toEqual(answers.map(() => 201));
      const after = await batchCounts(app);
      // Each large one went alone, by rule, and only the small appends ever sat in a batch.
      expect(after.aloneForLargeDelta - before.aloneForLargeDelta).toBe(heavy.length);
      expect(after.aloneForSharedState - before.aloneForSharedState).toBe(0);
      expect(after.batchedAppends - before.batchedAppends).toBeLessThanOrEqual(light.length);
      for (const sessionId of heavy) expect((await snapshot(sessionId)).session!.state).toEqual(big);
    } finally {
      await app.close();
    }
  });

  it('sends an append that writes user: or app: state alone, and loses no shared key under concurrency', async () => {
    const sessions = await Promise.all(Array.from({ length: 10 }, () => newSession()));
    const before = await batchCounts();
    const responses = await Promise.all(
      sessions.flatMap((sessionId, i) => [
        append(sessionId, { author: 'user', actions: { stateDelta: { [`user:k${i}`]: i, [`app:batch-k${i}`]: i } } }),
        append(sessionId, { author: 'user', actions: { stateDelta: { own: i } } }),
      ]),
    );
    expect(responses.map((res) => res.statusCode)).toEqual(responses.map(() => 201));
    const after = await batchCounts();
    // Each of the 10 appends with user: or app: keys went alone, by rule; only the 10 session-only
    // appends can have joined a batch.
    expect(after.aloneForSharedState - before.aloneForSharedState).toBe(10);
    expect(after.aloneForLargeDelta - before.aloneForLargeDelta).toBe(0);
    expect(after.batchedAppends - before.batchedAppends).toBeLessThanOrEqual(10);

    const user = await t.db.selectFrom('space_users').select('state').where('account_id', '=', t.account.accountId).where('user_id', '=', USER).executeTakeFirstOrThrow();
    const space = await t.db.selectFrom('session_spaces').select('state').where('account_id', '=', t.account.accountId).where('space_id', '=', t.account.defaultSpaceId).executeTakeFirstOrThrow();
    for (let i = 0; i < sessions.length; i++) {
      expect(user.state).toMatchObject({ [`user:k${i}`]: i });
      expect(space.state).toMatchObject({ [`app:batch-k${i}`]: i });
      expect((await snapshot(sessions[i]!)).session).toMatchObject({ state: { own: i }, event_count: 2 });
    }
  });

  it('sends the next batch to the database before it answers the appends of the batch that came back', async () => {
    // The instance's batcher itself, one call at a time, so that what waits is known.
    const batcher = createAppendBatcher(t.db, { ...batchingOptions({ ...DEFAULT_LIMITS, ...LIMITS }, createAccountSlots({ total: 2, perAccount: 1 })), batchScope: 'any-accounts' });
    const keys = (await Promise.all(Array.from({ length: 5 }, () => newSession()))).map((sessionId) => ({
      accountId: t.account.accountId,
      spaceId: t.account.defaultSpaceId,
      userId: USER,
      sessionId,
    }));
    const append = (key: (typeof keys)[number]) => batcher.append(key, [{ eventId: randomUUID(), author: 'user', payloadHash: '00'.repeat(32) }], undefined);
    const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

    // The first goes out alone; the next two wait for it and go out together as batch one.
    const first = append(keys[0]!);
    const batchOne = [append(keys[1]!), append(keys[2]!)].map((answer) => answer.then((session) => ({ session, batchesSent: batcher.stats.batches })));
    while (batcher.stats.batches < 1) await nextTurn();
    // These two arrive while batch one is out: they wait for it, and go out as batch two.
    const batchTwo = [append(keys[3]!), append(keys[4]!)];

    const answeredOne = await Promise.all(batchOne);
    expect(answeredOne.map(({ session }) => session?.event_count)).toEqual([1, 1]);
    // When batch one's appends were answered, batch two was already out.
    expect(answeredOne.map(({ batchesSent }) => batchesSent)).toEqual([2, 2]);
    expect((await first)?.event_count).toBe(1);
    expect((await Promise.all(batchTwo)).map((session) => session?.event_count)).toEqual([1, 1]);
    expect(batcher.stats).toMatchObject({ batches: 2, batchedAppends: 4, refusedWhole: 0, rerunAlone: 0 });
  });
});

// PostgreSQL only: PGlite is one connection, so two instances there never hold locks at once.
describe.runIf(inject('testBackend').kind === 'postgres')('group commit on two instances (PostgreSQL)', () => {
  it('batches of two instances lock the same sessions in one order: no deadlock, no rerun, seq 1..n', { timeout: 60_000 }, async () => {
    const url = t.database.pool.options.connectionString!;
    const handles = await Promise.all([1, 2].map(() => openDatabase({ kind: 'postgres', url, poolMax: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 10_000 })));
    // Batches wait for each other's locks as long as they need (no lock-wait budget): a rerun here
    // can only be a deadlock the detector broke.
    const limits = { ...DEFAULT_LIMITS, rateLimitMax: 0, appendBatchConcurrency: 2, appendBatchMax: 32, appendBatchLockWaitMs: 30_000 };
    const apps = await Promise.all(handles.map((handle) => buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits })));
    try {
      const sessions = await Promise.all(Array.from({ length: 8 }, () => newSession()));
      const rounds = 12;
      const before = await Promise.all(apps.map((app) => batchCounts(app)));
      // Each instance gets every session in every round, the two in opposite orders: batches of
      // unsorted appends would lock them in opposite orders and deadlock.
      const responses = await Promise.all(
        apps.flatMap((app, instance) =>
          Array.from({ length: rounds }, (_, round) => (instance === 0 ? sessions : [...sessions].reverse()).map((sessionId) => ({ app, sessionId, round, instance }))).flat(),
        ).map(({ app, sessionId, round, instance }) =>
          app.inject({
            method: 'POST',
            url: eventsUrl(sessionId),
            headers: { authorization: `Bearer ${t.account.rootCredential.token}` },
            payload: { author: 'user', actions: { stateDelta: { [`i${instance}r${round}`]: true } } },
          }),
        ),
      );
      expect(responses.map((res) => res.statusCode)).toEqual(responses.map(() => 201));
      const after = await Promise.all(apps.map((app) => batchCounts(app)));
      expect(after.map((counts, i) => counts.reruns - before[i]!.reruns)).toEqual([0, 0]);
      expect(after.map((counts, i) => counts.batchedAppends - before[i]!.batchedAppends).every((n) => n >= 2)).toBe(true);
      for (const sessionId of sessions) {
        const { session, events } = await snapshot(sessionId);
        expect(events.map((event) => Number(event.seq))).toEqual(Array.from({ length: 2 * rounds }, (_, i) => i + 1));
        expect(Object.keys(session!.state as object)).toHaveLength(2 * rounds);
      }
    } finally {
      await Promise.all(apps.map((app) => app.close()));
      await Promise.all(handles.map((handle) => handle.close()));
    }
  });

  it('when a batch is cancelled by the statement timeout behind a locked session, runs each of its appends alone: only the locked one fails', { timeout: 30_000 }, async () => {
    const handle = await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 4, statementTimeoutMs: 500, connectTimeoutMs: 10_000 });
    const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0, appendBatchConcurrency: 1, appendBatchLockWaitMs: 10_000 } });
    // A lock-wait budget longer than the statement timeout: the timeout cancels the whole batch first.
    // Sessions locked by another transaction, as a long import or a stuck client would hold them.
    const holder = await t.database.pool.connect();
    try {
      const [blocker, locked, ...free] = await Promise.all(Array.from({ length: 8 }, () => newSession()));
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = ANY ($2) FOR UPDATE', [t.account.accountId, [blocker, locked]]);
      const lockedBefore = await snapshot(locked!);
      const before = await batchCounts(app);
      const post = (sessionId: string) =>
        app.inject({ method: 'POST', url: eventsUrl(sessionId), headers: { authorization: `Bearer ${t.account.rootCredential.token}` }, payload: { author: 'user', actions: { stateDelta: { ok: 1 } } } });
      // The blocker's call goes out first, alone, and waits for its locked session until the
      // statement timeout; the others arrive meanwhile and then go out as one batch, which waits
      // for the other locked session until the timeout cancels it too.
      const blockerAnswer = post(blocker!);
      await untilQueue(app, { callsOut: 1, waiting: 0 });
      const [lockedAnswer, ...freeAnswers] = await Promise.all([locked!, ...free].map(post));
      await holder.query('ROLLBACK');

      expect((await blockerAnswer).json().error.code).toBe('ResourceUnavailable.Database');
      expect(freeAnswers.map((res) => res.statusCode)).toEqual(free.map(() => 201));
      expect(lockedAnswer!.statusCode).toBe(503);
      expect(lockedAnswer!.json().error.code).toBe('ResourceUnavailable.Database');
      expect(await snapshot(locked!)).toEqual(lockedBefore);
      for (const sessionId of free) expect((await snapshot(sessionId)).events).toHaveLength(1);
      const after = await batchCounts(app);
      expect(after.batchedAppends - before.batchedAppends).toBe(free.length + 1);
      expect(after.reruns - before.reruns).toBe(free.length + 1);
    } finally {
      holder.release();
      await app.close();
      await handle.close();
    }
  });

  it('when a batch loses its connection, answers each of its appends 503 and writes none of them; retried with their eventIds, each is stored once', { timeout: 30_000 }, async () => {
    const handle = await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 4, statementTimeoutMs: 10_000, connectTimeoutMs: 10_000 });
    const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0, appendBatchConcurrency: 1, appendBatchLockWaitMs: 10_000 } });
    // Two transactions of others: one holds the blocker's session for a moment, the other holds a
    // session of the batch until the batch's connection is gone.
    const [blockerHolder, lockedHolder, killer] = [await t.database.pool.connect(), await t.database.pool.connect(), await t.database.pool.connect()];
    const lockSessions = async (holder: typeof killer, sessionIds: string[]) => {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = ANY ($2) FOR UPDATE', [t.account.accountId, sessionIds]);
    };
    try {
      const [blocker, locked, ...free] = await Promise.all(Array.from({ length: 6 }, () => newSession()));
      const batched = [locked!, ...free];
      await lockSessions(blockerHolder, [blocker!]);
      await lockSessions(lockedHolder, [locked!]);
      const before = await Promise.all(batched.map(snapshot));
      const counts = await batchCounts(app);
      const post = (sessionId: string) =>
        app.inject({
          method: 'POST',
          url: eventsUrl(sessionId),
          headers: { authorization: `Bearer ${t.account.rootCredential.token}` },
          payload: { eventId: `lost-${sessionId}`, author: 'user', actions: { stateDelta: { ok: 1 } } },
        });
      // The blocker's call holds the one append call while the others arrive; once its session is
      // free they go out as one batch, which waits for the locked session (within its 10 s lock
      // budget) until its connection is terminated under it.
      const blockerAnswer = post(blocker!);
      await untilQueue(app, { callsOut: 1, waiting: 0 });
      const batchAnswers = Promise.all(batched.map(post));
      await untilQueue(app, { callsOut: 1, waiting: batched.length });
      await blockerHolder.query('ROLLBACK');
      expect((await blockerAnswer).statusCode).toBe(201);
      let batchBackend: number | undefined;
      for (let attempt = 0; attempt < 200 && batchBackend === undefined; attempt++) {
        const { rows } = await killer.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%append_events_batch_whole(%' AND wait_event_type = 'Lock'",
        );
        batchBackend = rows[0]?.pid;
        if (batchBackend === undefined) await new Promise((resolve) => setTimeout(resolve, 25));
      }
      expect(batchBackend).toBeDefined();
      await killer.query('SELECT pg_terminate_backend($1)', [batchBackend]);
      const answers = await batchAnswers;
      await lockedHolder.query('ROLLBACK');

      // What committed is unknown to the service after a lost connection: every append of the
      // batch is answered 503 with Retry-After, none as written and none run again behind the
      // client's back, and the database shows none of them.
      expect(answers.map((res) => res.statusCode)).toEqual(answers.map(() => 503));
      for (const res of answers) {
        expect(res.json().error.code).toBe('ResourceUnavailable.Database');
        expect(res.headers['retry-after']).toBeDefined();
      }
      expect(await Promise.all(batched.map(snapshot))).toEqual(before);
      // The call that was terminated was the batch's (found by its statement above), and none of its
      // appends was run again alone. It is counted as the batch it was, with its appends.
      const after = await batchCounts(app);
      expect(after.reruns - counts.reruns).toBe(0);
      expect(after.batches - counts.batches).toBe(1);
      expect(after.batchedAppends - counts.batchedAppends).toBe(batched.length);

      // The client's retry with the same eventIds stores each event once.
      const retried = await Promise.all(batched.map(post));
      expect(retried.map((res) => res.statusCode)).toEqual(retried.map(() => 201));
      for (const sessionId of batched) expect((await snapshot(sessionId)).events.map((event) => event.event_id)).toEqual([`lost-${sessionId}`]);
    } finally {
      for (const client of [killer, lockedHolder, blockerHolder]) client.release();
      await app.close();
      await handle.close();
    }
  });

  it('with two calls allowed, appends that arrive while one is out wait and go together, and go out while it is stuck', { timeout: 30_000 }, async () => {
    const handle = await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 4, statementTimeoutMs: 10_000, connectTimeoutMs: 10_000 });
    const limits = { ...DEFAULT_LIMITS, appendBatchConcurrency: 2 };
    // The instance's batcher itself, so that the appends reach it in one tick, as they do under load.
    const batcher = createAppendBatcher(handle.db, { ...batchingOptions(limits, createAccountSlots({ total: 2, perAccount: 1 })), batchScope: 'any-accounts' });
    const holder = await t.database.pool.connect();
    try {
      const keys = (await Promise.all(Array.from({ length: 5 }, () => newSession()))).map((sessionId) => ({
        accountId: t.account.accountId,
        spaceId: t.account.defaultSpaceId,
        userId: USER,
        sessionId,
      }));
      const [blocker, ...free] = keys;
      const append = (key: (typeof keys)[number]) => batcher.append(key, [{ eventId: randomUUID(), author: 'user', payloadHash: '00'.repeat(32) }], undefined);
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = $2 FOR UPDATE', [t.account.accountId, blocker!.sessionId]);
      const before = { ...batcher.stats };
      // The blocker's call goes out alone, at once, and waits for its lock until the holder lets go.
      // A second call is allowed, but sending the first of the others at once would split them: they
      // wait for the call out, which becomes overdue while it is stuck, and then go out as one batch.
      let blockerAnswered = false;
      const blockerAnswer = append(blocker!).finally(() => (blockerAnswered = true));
      const freeAnswers = await Promise.all(free.map(append));
      const answeredWhileStuck = !blockerAnswered;
      await holder.query('COMMIT');

      expect(freeAnswers.map((session) => session?.event_count)).toEqual(free.map(() => 1));
      expect(answeredWhileStuck).toBe(true);
      expect((await blockerAnswer)?.event_count).toBe(1);
      expect(batcher.stats.batches - before.batches).toBe(1);
      expect(batcher.stats.batchedAppends - before.batchedAppends).toBe(free.length);
      expect(batcher.stats.rerunAlone - before.rerunAlone).toBe(0);
    } finally {
      holder.release();
      await handle.close();
    }
  });

  it('when a session of a batch stays locked, only its append leaves the batch: the batch writes the others at once', { timeout: 30_000 }, async () => {
    const handle = await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 4, statementTimeoutMs: 2_000, connectTimeoutMs: 10_000 });
    const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0, appendBatchConcurrency: 1, appendSessionQueueWaitMs: 500 } });
    const holder = await t.database.pool.connect();
    try {
      const [blocker, locked, ...free] = await Promise.all(Array.from({ length: 8 }, () => newSession()));
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = ANY ($2) FOR UPDATE', [t.account.accountId, [blocker, locked]]);
      const lockedBefore = await snapshot(locked!);
      const before = await batchCounts(app);
      const post = (sessionId: string) =>
        app.inject({ method: 'POST', url: eventsUrl(sessionId), headers: { authorization: `Bearer ${t.account.rootCredential.token}` }, payload: { author: 'user', actions: { stateDelta: { ok: 1 } } } });
      // The blocker's call goes out alone and waits for its lock; the others arrive meanwhile and
      // go out as one batch, which gives up on the locked session after the lock-wait budget.
      const blockerAnswer = post(blocker!);
      await untilQueue(app, { callsOut: 1, waiting: 0 });
      const answers = [locked!, ...free].map(post);
      // Answered while the other session is still locked: the batch did not wait for it.
      const freeAnswers = await Promise.all(answers.slice(1));
      const lockedAnswer = await answers[0]!;
      await holder.query('ROLLBACK');

      expect(freeAnswers.map((res) => res.statusCode)).toEqual(free.map(() => 201));
      // Queued behind its session for longer than appendSessionQueueWaitMs: refused unsent.
      expect(lockedAnswer.statusCode).toBe(503);
      expect(lockedAnswer.json().error.code).toBe('ResourceUnavailable.Database');
      expect(lockedAnswer.headers['retry-after']).toBeDefined();
      expect((await blockerAnswer).json().error.code).toBe('ResourceUnavailable.Database');
      expect(await snapshot(locked!)).toEqual(lockedBefore);
      for (const sessionId of free) expect((await snapshot(sessionId)).events).toHaveLength(1);
      const after = await batchCounts(app);
      expect(after.batchedAppends - before.batchedAppends).toBe(free.length + 1);
      expect(after.reruns - before.reruns).toBe(1);
    } finally {
      holder.release();
      await app.close();
      await handle.close();
    }
  });

  it('after an append timed out on its session\'s lock, the session\'s next appends go alone and join no batch: the others\' batch does not wait for the row again', { timeout: 30_000 }, async () => {
    const handle = await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 4, statementTimeoutMs: 500, connectTimeoutMs: 10_000 });
    // One call at a time: an append that held the slot would hold up every other append.
    const limits = { ...DEFAULT_LIMITS, appendBatchConcurrency: 1, appendSessionQueueWaitMs: 5_000 };
    const batcher = createAppendBatcher(handle.db, { ...batchingOptions(limits, createAccountSlots({ total: 2, perAccount: 1 })), batchScope: 'any-accounts' });
    const holder = await t.database.pool.connect();
    try {
      const [locked, ...free] = await Promise.all(Array.from({ length: 3 }, () => newSession()));
      const keyOf = (sessionId: string) => ({ accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
      const append = (sessionId: string) => batcher.append(keyOf(sessionId), [{ eventId: randomUUID(), author: 'user', payloadHash: '00'.repeat(32) }], undefined);
      const codeOf = (answer: Promise<unknown>) => answer.then(() => 'stored', (error: { code?: string }) => error.code);
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = $2 FOR UPDATE', [t.account.accountId, locked]);

      // The first append goes out in the slot and waits for the row until the statement timeout.
      expect(await codeOf(append(locked!))).toBe('57014');
      // A client retrying at once, the row still locked, beside appends of two other sessions: the
      // retry waits alone, outside the slot. Without that it would join their batch, which would
      // wait out its lock budget, be refused whole and go again append by append (a batch of 3,
      // one refusal, one append run again alone).
      const before = { ...batcher.stats };
      let retryAnswered = false;
      const retry = codeOf(append(locked!)).finally(() => (retryAnswered = true));
      const freeAnswers = await Promise.all(free.map(append));
      const answeredWhileLocked = !retryAnswered;
      expect(freeAnswers.map((session) => session?.event_count)).toEqual([1, 1]);
      expect(batcher.stats.batchedAppends - before.batchedAppends).toBe(free.length);
      expect(batcher.stats.refusedWhole - before.refusedWhole).toBe(0);
      expect(batcher.stats.rerunAlone - before.rerunAlone).toBe(0);
      expect(answeredWhileLocked).toBe(true);
      expect(await retry).toBe('57014');

      // Once the row is free, the session's appends are stored again, from seq 1.
      await holder.query('ROLLBACK');
      expect((await append(locked!))?.event_count).toBe(1);
      expect((await snapshot(locked!)).events.map((event) => event.seq)).toEqual([1]);
    } finally {
      holder.release();
      await handle.close();
    }
  });
});

describe('a batch written whole, or append by append when one of it is refused (migrations/0014)', () => {
  const keyOf = (sessionId: string) => ({ accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
  const appendOf = (sessionId: string, eventId: string, delta?: JsonObject, more: Partial<BatchedAppend> = {}): BatchedAppend => ({
    ...keyOf(sessionId),
    events: [{ eventId, author: 'user', payloadHash: '00'.repeat(32), ...(delta ? { session: { delta, mode: 'merge-patch' as const } } : {}) }],
    ...more,
  });
  const send = (appends: BatchedAppend[], lockWaitMs = 200) =>
    appendBatchInDatabase(t.db, { scope: 'any-accounts', accountId: t.account.accountId }, appends, LIMITS.stateBytes, lockWaitMs);

  it('writes a batch with nothing to refuse in one call, two appends of one session one after the other', async () => {
    const [first, second] = await Promise.all([newSession({ kept: true }), newSession()]);
    const result = await send([appendOf(first!, 'a1', { a: 1 }), appendOf(first!, 'a2', { b: 2 }, { ifMatch: [2] }), appendOf(second!, 'b1')]);

    expect(result.refusedWhole).toBe(false);
    expect(result.rows.map((row) => [row.ordinal, Number(row.event_count), Number(row.revision), row.state, row.session_bytes])).toEqual([
      [1, 1, 2, '{"a": 1, "kept": true}', 22],
      [2, 2, 3, '{"a": 1, "b": 2, "kept": true}', 30],
      [3, 1, 2, '{}', null],
    ]);
    // The user's and the space's state as they are (other tests of this file write them too).
    const { rows: shared } = await t.db.executeQuery<{ user_state: string; app_state: string }>(
      CompiledQuery.raw(
        `SELECT u.state::text AS user_state, sp.state::text AS app_state FROM space_users AS u
         JOIN session_spaces AS sp USING (account_id, space_id) WHERE u.account_id = $1 AND u.space_id = $2 AND u.user_id = $3`,
        [t.account.accountId, t.account.defaultSpaceId, USER],
      ),
    );
    expect(result.rows.map((row) => [row.user_state, row.app_state, row.user_bytes, row.app_bytes])).toEqual(
      result.rows.map(() => [shared[0]!.user_state, shared[0]!.app_state, null, null]),
    );
    const [firstAfter, secondAfter] = await Promise.all([snapshot(first!), snapshot(second!)]);
    expect(firstAfter.events.map((event) => [Number(event.seq), event.event_id])).toEqual([[1, 'a1'], [2, 'a2']]);
    expect(firstAfter.session).toMatchObject({ state: { kept: true, a: 1, b: 2 }, event_count: 2, revision: 3 });
    expect(secondAfter.events.map((event) => [Number(event.seq), event.event_id])).toEqual([[1, 'b1']]);
  });

  it('when one append is refused, writes nothing whole and then each other append once, as append_events_batch() does', async () => {
    const [good, stale, stored, full, other] = await Promise.all([newSession(), newSession(), newSession(), newSession({ big: 'x'.repeat(900) }), newSession()]);
    expect((await send([appendOf(stored!, 'kept-id')])).refusedWhole).toBe(false);
    const untouched = await Promise.all([stale, stored, full].map((sessionId) => snapshot(sessionId!)));

    // Each refusal alone in a batch of good appends: If-Match, a stored eventId, the state limit.
    for (const [index, refused] of [
      appendOf(stale!, 'stale-1', undefined, { ifMatch: [7] }),
      appendOf(stored!, 'kept-id', { again: true }),
      appendOf(full!, 'full-1', { more: 'y'.repeat(200) }),
    ].entries()) {
      const result = await send([appendOf(good!, `good-${index}`, { [`g${index}`]: index }), refused, appendOf(other!, `other-${index}`)]);
      expect(result.refusedWhole).toBe(true);
      expect(result.rows.map((row) => [row.ordinal, Number(row.event_count)])).toEqual([
        [1, index + 1],
        [3, index + 1],
      ]);
    }

    expect(await Promise.all([stale, stored, full].map((sessionId) => snapshot(sessionId!)))).toEqual(untouched);
    const [goodAfter, otherAfter] = await Promise.all([snapshot(good!), snapshot(other!)]);
    expect(goodAfter.events.map((event) => event.event_id)).toEqual(['good-0', 'good-1', 'good-2']);
    expect(goodAfter.session).toMatchObject({ state: { g0: 0, g1: 1, g2: 2 }, event_count: 3, revision: 4 });
    expect(otherAfter.events.map((event) => event.event_id)).toEqual(['other-0', 'other-1', 'other-2']);
  });

  it('refuses an append that writes user: state, which it does not write, and append_events_batch() writes it', async () => {
    const sessionId = await newSession();
    const withUserState: BatchedAppend = {
      ...keyOf(sessionId),
      events: [{ eventId: 'u1', author: 'user', payloadHash: '00'.repeat(32), user: { delta: { 'user:tone': 'warm' }, mode: 'merge-patch' } }],
    };
    const whole = t.db.executeQuery(
      CompiledQuery.raw('SELECT ordinal FROM append_events_batch_whole($1::jsonb, $2, $3)', [JSON.stringify([withUserState]), LIMITS.stateBytes, 200]),
    );
    await expect(whole).rejects.toMatchObject({ code: 'AS422' });
    expect((await snapshot(sessionId)).events).toEqual([]);

    const result = await send([withUserState]);
    expect(result.refusedWhole).toBe(true);
    expect(result.rows.map((row) => [row.ordinal, Number(row.event_count)])).toEqual([[1, 1]]);
    // The user's state is shared with the other tests' sessions of USER: only this key is this test's.
    expect(JSON.parse(result.rows[0]!.user_state)).toMatchObject({ 'user:tone': 'warm' });
  });

  // PostgreSQL only: on PGlite's one connection no other transaction can hold a session's lock.
  it.runIf(inject('testBackend').kind === 'postgres')('gives a batch that waited out its lock budget on the whole call only what is left of it append by append (PostgreSQL: a second connection holds the lock)', { timeout: 30_000 }, async () => {
    const [locked, free] = await Promise.all([newSession(), newSession()]);
    const holder = await t.database.pool.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND session_id = $2 FOR UPDATE', [t.account.accountId, locked]);
      const startedAt = performance.now();
      const result = await send([appendOf(free!, 'free-1'), appendOf(locked!, 'locked-1')], 1_000);
      const tookMs = performance.now() - startedAt;
      expect(result.refusedWhole).toBe(true);
      expect(result.rows.map((row) => row.ordinal)).toEqual([1]);
      // One budget in all (1 s), not one per call: the second call had 1 ms of it left.
      expect(tookMs).toBeGreaterThanOrEqual(990);
      expect(tookMs).toBeLessThan(1_900);
    } finally {
      await holder.query('ROLLBACK');
      holder.release();
    }
    expect((await snapshot(locked!)).events).toEqual([]);
    expect((await snapshot(free!)).events.map((event) => event.event_id)).toEqual(['free-1']);
  });
});
