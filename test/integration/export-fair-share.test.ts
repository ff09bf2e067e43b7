// An export holds one of its account's export slots (lib/account-slots.ts) from its first read to
// its last byte: an account whose exports fill its share waits for one of them, and another
// account's export goes ahead at once. Its database reads take one of the account's expensive
// slots each while they run, so an export nobody reads holds none: the account's lists go on.
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let address: string;
let b: CreatedAccount;
beforeAll(async () => {
  // Two expensive slots and two export slots on the instance, one of each per account.
  t = await createTestApp({ limits: { rateLimitMax: 0, listConcurrency: 2, expensivePerAccount: 1, exportsPerAccount: 1 } });
  address = await t.app.listen({ port: 0, host: '127.0.0.1' });
  b = await t.createAccount();
  // ~12 MB: more than the loopback socket buffers hold, so an export nobody reads stays open.
  await sessionWith(t.account.rootCredential.token, t.account.defaultSpaceId, 'big', 60, 200_000);
  await sessionWith(t.account.rootCredential.token, t.account.defaultSpaceId, 'small', 2, 100);
  await sessionWith(b.rootCredential.token, b.defaultSpaceId, 'small', 2, 100);
});
afterAll(async () => t.close());

const exportUrl = (spaceId: string, sessionId: string) => `/v1/spaces/${spaceId}/users/u1/sessions/${sessionId}/export`;

async function sessionWith(token: string, spaceId: string, sessionId: string, events: number, textBytes: number): Promise<void> {
  const created = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/u1/sessions`, payload: { sessionId }, token });
  expect(created.statusCode).toBe(201);
  for (let i = 0; i < events; i += 4) {
    const batch = Array.from({ length: Math.min(4, events - i) }, (_, k) => ({ author: 'agent', content: { role: 'model', parts: [{ text: `${i + k} `.padEnd(textBytes, 'x') }] } }));
    const appended = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/u1/sessions/${sessionId}/events`, payload: { events: batch }, token });
    expect(appended.statusCode).toBe(201);
  }
}

const gauge = (name: string) => async () => {
  const res = await t.request({ method: 'GET', url: '/metrics', token: null });
  return sampleValue(parsePrometheusText(res.body), name);
};
const waitingExports = gauge('exports_waiting');

/** A's export of `sessionId` whose headers arrived and whose client then reads nothing more. */
const stalledExport = (token: string, spaceId: string, sessionId: string) =>
  new Promise<{ request: http.ClientRequest; response: http.IncomingMessage }>((resolve, reject) => {
    const request = http.get(`${address}${exportUrl(spaceId, sessionId)}`, { headers: { authorization: `Bearer ${token}` } }, (response) => resolve({ request, response }));
    request.on('error', reject);
  });

describe('export and the expensive-request slots', () => {
  it("keeps one account's exports within its share, held until the last byte, while another account's export answers at once", async () => {
    const a = t.account;
    const before = await tableFingerprints(t.db);

    // A's first export: its headers arrive, then the client reads nothing more.
    const stalled = await stalledExport(a.rootCredential.token, a.defaultSpaceId, 'big');
    expect(stalled.response.statusCode).toBe(200);

    // A's second export waits for A's slot; nothing is answered meanwhile.
    let secondAnswered = false;
    const second = t.request({ method: 'GET', url: exportUrl(a.defaultSpaceId, 'small'), token: a.rootCredential.token }).finally(() => (secondAnswered = true));
    await expect.poll(waitingExports).toBe(1);

    // B's export takes the other slot at once, while A's second one still waits.
    const bExport = await t.request({ method: 'GET', url: exportUrl(b.defaultSpaceId, 'small'), token: b.rootCredential.token });
    expect(bExport.statusCode).toBe(200);
    expect(bExport.json()).toMatchObject({ session: { sessionId: 'small', eventCount: 2 }, events: [{ seq: 1 }, { seq: 2 }] });
    expect(secondAnswered).toBe(false);
    expect(await waitingExports()).toBe(1);

    // The client of the stalled export goes away: its slot is given back and A's second export runs.
    stalled.request.destroy();
    const answer = await second;
    expect(answer.statusCode).toBe(200);
    expect(answer.json()).toMatchObject({ session: { sessionId: 'small', eventCount: 2 } });
    expect(await waitingExports()).toBe(0);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it("holds no expensive slot while its client does not read: the account's lists and state-at reads answer meanwhile", async () => {
    const a = t.account;
    const before = await tableFingerprints(t.db);
    const stalled = await stalledExport(a.rootCredential.token, a.defaultSpaceId, 'big');
    expect(stalled.response.statusCode).toBe(200);
    // Its reads ran ahead of the reader until the socket's buffers filled; then none runs. Reading
    // that far took more than vitest's default second on a loaded machine (CI runs three suites at
    // once on two cores: seen on PGlite); this poll keeps its own 20 s, wider than the suite's
    // default (vitest.config.ts).
    await expect.poll(gauge('expensive_requests_running'), { timeout: 20_000 }).toBe(0);
    expect(await gauge('exports_open')()).toBe(1);
    // With a share of one expensive slot, a slot held by the stalled export would make these wait.
    const list = await t.request({ method: 'GET', url: `/v1/spaces/${a.defaultSpaceId}/sessions?pageSize=5`, token: a.rootCredential.token });
    expect(list.statusCode).toBe(200);
    expect(list.json().sessions.map((session: { sessionId: string }) => session.sessionId).sort()).toEqual(['big', 'small']);
    const stateAt = await t.request({ method: 'GET', url: `/v1/spaces/${a.defaultSpaceId}/users/u1/sessions/big/state-at/3`, token: a.rootCredential.token });
    expect(stateAt.statusCode).toBe(200);
    expect(await gauge('exports_open')()).toBe(1);

    // Read to its end, the export is whole: 60 events in order, then its slot is given back.
    const chunks: Buffer[] = [];
    for await (const chunk of stalled.response) chunks.push(chunk as Buffer);
    const document = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    expect(document.events.map((event: { seq: number }) => event.seq)).toEqual(Array.from({ length: 60 }, (_, i) => i + 1));
    await expect.poll(gauge('exports_open'), { timeout: 20_000 }).toBe(0);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('gives the slot back when the export answers 404', async () => {
    const before = await tableFingerprints(t.db);
    for (let i = 0; i < 3; i++) {
      const res = await t.request({ method: 'GET', url: exportUrl(t.account.defaultSpaceId, 'missing') });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.Session');
    }
    // With the share of one, a slot kept by a 404 would make this export wait for ever.
    const res = await t.request({ method: 'GET', url: exportUrl(t.account.defaultSpaceId, 'small') });
    expect(res.statusCode).toBe(200);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });
});
