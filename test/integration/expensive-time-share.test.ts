// The expensive requests' time share (src/lib/account-slots.ts, docs/design.md §8): an account whose
// budget of slot time is spent waits for it to refill, with free slots, while another account's
// expensive request is answered at once; nothing is refused.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  // A budget of 0.5 ms refilling at 2 ms a second, each request charged at most 5 ms: a session list
  // (at least a millisecond) spends it for half a second to 2.5 s, whatever the machine's speed.
  t = await createTestApp({ limits: { rateLimitMax: 0, expensiveTimeShare: { perSecond: 0.002, burstSeconds: 0.0005, maxChargeSeconds: 0.005 } } });
});
afterAll(async () => t.close());

const expensive = async () => {
  const samples = parsePrometheusText((await t.request({ method: 'GET', url: '/metrics', token: null })).body);
  return { running: sampleValue(samples, 'expensive_requests_running'), waiting: sampleValue(samples, 'expensive_requests_waiting') };
};

describe('the expensive requests’ time share', () => {
  it("makes an account that spent its budget wait for it, while another account's list is answered at once", async () => {
    const a = t.account;
    const b = await t.createAccount();
    const list = (account: typeof a) => t.request({ method: 'GET', url: `/v1/spaces/${account.defaultSpaceId}/sessions`, token: account.rootCredential.token });
    // Lists take the budget and more: each one's duration is charged, the budget goes below 0.
    for (let i = 0; i < 2; i++) expect((await list(a)).statusCode).toBe(200);
    const next = list(a);
    // It waits with every slot free: for its account's time, not for a slot.
    await expect.poll(expensive).toEqual({ running: 0, waiting: 1 });
    // B's budget is its own: its list is answered while A's waits.
    expect((await list(b)).statusCode).toBe(200);
    // Once A's budget refills, its list is answered, not refused.
    expect((await next).statusCode).toBe(200);
    expect(await expensive()).toEqual({ running: 0, waiting: 0 });
  });
});
