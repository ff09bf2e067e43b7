// Heavy appends are batched fairly (src/modules/events/batch-choice.ts): in a space whose state is
// half a megabyte every append answers half a megabyte, and one account's many such appends must
// not hold another account's append behind all of them, first-come first-served. Once the heavy
// sessions are known, a group-commit call takes the accounts' appends in turns, within 4 MB of
// expected answer. Order, not time, is what this test reads: which answers came before the other
// account's.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';
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
