// Heavy appends are batched fairly (src/modules/events/batch-choice.ts): in a space whose state is
// half a megabyte every append answers half a megabyte, and one account's many such appends must
// not hold another account's append behind all of them, first-come first-served. Once the heavy
// sessions are known, a group-commit call takes the accounts' appends in turns, within 4 MB of
// expected answer; and with two calls allowed, light appends go in calls of their own, never in
// or behind a heavy call (append-batcher.ts, nextCallKind). Order, not time, is what these tests
// read: which answers came before the other account's, or before a lock was let go.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { openDatabase } from '../../src/db/connect.js';
import type { SessionKey } from '../../src/db/keys.js';
import { createAccountSlots } from '../../src/lib/account-slots.js';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';
import { batchingOptions, createAppendBatcher } from '../../src/modules/events/append-batcher.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// One append call out at a time: whatever arrives meanwhile waits and forms the next batches.
const LIMITS = { appendBatchConcurrency: 1, appendBatchMax: 32, rateLimitMax: 0 };
const HEAVY_SESSIONS = 40;

let t: TestApp;
let light: CreatedAccount;
let heavySpace: string;
beforeAll(async () => {
  t = await createTestApp({ limits: LIMITS });
  light = await t.createAccount('light');
  heavySpace = (await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'heavy' } })).json().spaceId;
  for (let i = 0; i < HEAVY_SESSIONS; i++) {
    expect((await t.request({ method: 'POST', url: `/v1/spaces/${heavySpace}/users/u${i}/sessions`, payload: { sessionId: 's' } })).statusCode).toBe(201);
  }
  // A space state of 8 × 60 KB (each delta within its 64 KiB limit).
  for (let k = 0; k < 8; k++) {
    const res = await t.request({ method: 'POST', url: `/v1/spaces/${heavySpace}/users/u0/sessions/s/events`, payload: { author: 'a', actions: { stateDelta: { [`app:k${k}`]: 'x'.repeat(60_000) } } } });
    expect(res.statusCode, res.body).toBe(201);
  }
  expect((await t.request({ method: 'POST', url: `/v1/spaces/${light.defaultSpaceId}/users/u/sessions`, payload: { sessionId: 's' }, token: light.rootCredential.token })).statusCode).toBe(201);
});
afterAll(async () => t?.close());

const heavyAppend = (i: number, n: number) =>
  t.request({ method: 'POST', url: `/v1/spaces/${heavySpace}/users/u${i}/sessions/s/events`, payload: { author: 'a', actions: { stateDelta: { n } } } });

describe('heavy appends in the group commit', () => {
  it("answers another account's append after a few heavy ones, not after all of them", async () => {
    // Each heavy session answers once alone, so that its weight is known.
    for (let i = 0; i < HEAVY_SESSIONS; i++) {
      const res = await heavyAppend(i, 0);
      expect(res.statusCode).toBe(201);
      expect(res.body.length).toBeGreaterThan(480_000);
    }
    const answered: string[] = [];
    const heavy = Array.from({ length: HEAVY_SESSIONS }, (_, i) => heavyAppend(i, 1).then((res) => (expect(res.statusCode).toBe(201), answered.push(`heavy ${i}`))));
    // Sent after all of them, so it waits behind them in arrival order.
    const lightAppend = t
      .request({ method: 'POST', url: `/v1/spaces/${light.defaultSpaceId}/users/u/sessions/s/events`, payload: { author: 'b' }, token: light.rootCredential.token })
      .then((res) => (expect(res.statusCode).toBe(201), answered.push('light')));
    await Promise.all([...heavy, lightAppend]);
    // First come, first served, it came after the first call's append and a batch of 32 heavy ones
    // (16 MB); taken in turns within 4 MB, it is in the second call.
    expect(answered.indexOf('light')).toBeLessThan(16);
    expect(answered).toHaveLength(HEAVY_SESSIONS + 1);
  });
});

describe.runIf(inject('testBackend').kind === 'postgres')('heavy and light appends in calls of their own (PostgreSQL)', () => {
  it('with two calls allowed, light appends go out and are answered while a heavy call is stuck and another heavy append waits', { timeout: 60_000 }, async () => {
    const handle = await openDatabase({ kind: 'postgres', url: t.database.pool.options.connectionString!, poolMax: 4, statementTimeoutMs: 30_000, connectTimeoutMs: 10_000 });
    // A batch waits for locked rows longer than this test does: a light append sent in a heavy
    // call would be answered only after the holder lets go.
    const limits = { ...DEFAULT_LIMITS, appendBatchConcurrency: 2, appendBatchLockWaitMs: 20_000 };
    const batcher = createAppendBatcher(handle.db, { ...batchingOptions(limits, createAccountSlots({ total: 4, perAccount: 4 })), batchScope: 'any-accounts' });
    const holder = await t.database.pool.connect();
    try {
      const heavyKey = (i: number): SessionKey => ({ accountId: t.account.accountId, spaceId: heavySpace, userId: `u${i}`, sessionId: 's' });
      const lightKeys: SessionKey[] = [];
      for (const sessionId of ['l1', 'l2', 'l3']) {
        expect((await t.request({ method: 'POST', url: `/v1/spaces/${light.defaultSpaceId}/users/u/sessions`, payload: { sessionId }, token: light.rootCredential.token })).statusCode).toBe(201);
        lightKeys.push({ accountId: light.accountId, spaceId: light.defaultSpaceId, userId: 'u', sessionId });
      }
      const append = (key: SessionKey) => batcher.append(key, [{ eventId: randomUUID(), author: 'a', payloadHash: '00'.repeat(32) }], undefined);
      const eventCount = async (key: SessionKey) =>
        (await t.db.selectFrom('sessions').select('event_count').where('account_id', '=', key.accountId).where('space_id', '=', key.spaceId).where('user_id', '=', key.userId).where('session_id', '=', key.sessionId).executeTakeFirstOrThrow()).event_count;
      // One answer teaches the batcher that the space's sessions answer half a megabyte.
      expect((await append(heavyKey(1)))!.app_state.length).toBeGreaterThan(480_000);
      const before = { h1: await eventCount(heavyKey(1)), h2: await eventCount(heavyKey(2)) };

      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM sessions WHERE account_id = $1 AND space_id = $2 AND user_id IN ($3, $4) FOR UPDATE', [t.account.accountId, heavySpace, 'u1', 'u2']);
      const heavyAnswered: string[] = [];
      const h1 = append(heavyKey(1)).finally(() => heavyAnswered.push('h1'));
      for (let attempt = 0; attempt < 200 && batcher.callsOut === 0; attempt++) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(batcher.callsOut).toBe(1);
      // Together, in one tick: the second heavy append waits for the heavy call out; the light
      // ones go in the call left, one after the other.
      const h2 = append(heavyKey(2)).finally(() => heavyAnswered.push('h2'));
      const lights = Promise.all(lightKeys.map(append));
      const outcome = await Promise.race([lights.then(() => 'light answered'), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 10_000))]);
      const heavyAnsweredMeanwhile = [...heavyAnswered];
      await holder.query('COMMIT');

      expect(outcome).toBe('light answered');
      expect(heavyAnsweredMeanwhile).toEqual([]);
      expect((await lights).map((session) => session?.event_count)).toEqual([1, 1, 1]);
      expect([(await h1)?.event_count, (await h2)?.event_count]).toEqual([before.h1 + 1, before.h2 + 1]);
      expect((await h2)!.app_state.length).toBeGreaterThan(480_000);
    } finally {
      holder.release();
      await handle.close();
    }
  });
});
