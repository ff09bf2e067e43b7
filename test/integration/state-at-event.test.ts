// GET …/state-at/{seq} (issue 13): the session-scoped state right after event N, replayed in the
// database, equals the live state the append answered at that point, for every N of a history that
// mixes merge-patch and replace deltas, nested merges, deletions and shared-scope keys.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/db/schema.js';
import { tableFingerprints } from '../support/db-snapshot.js';
import { insertSpace } from '../support/fixtures.js';
import { insertSubAccount } from '../support/principals.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let spaceId: string;
let session: string;
/** The session-scoped state the append answered after each seq (index = seq). */
const liveAfter: JsonObject[] = [];

const sessionScoped = (state: JsonObject) => Object.fromEntries(Object.entries(state).filter(([key]) => !key.startsWith('user:') && !key.startsWith('app:')));

const deltas: Array<{ stateDelta: JsonObject; stateDeltaMode?: 'merge-patch' | 'replace' }> = [
  { stateDelta: { step: 1, profile: { name: 'Ada', langs: ['en'] } } },
  { stateDelta: { 'user:plan': 'pro', 'app:region': 'eu', 'temp:scratch': 1, profile: { city: 'Paris' } } },
  { stateDelta: { profile: { name: null, langs: ['en', 'fr'] }, cart: { items: 2 } } },
  { stateDelta: { cart: { total: 10 }, step: 2 }, stateDeltaMode: 'replace' },
  { stateDelta: {} },
  { stateDelta: { cart: null, seed: 'kept from create' } },
];

beforeAll(async () => {
  t = await createTestApp();
  spaceId = await insertSpace(t.db, t.account.accountId);
  session = `/v1/spaces/${spaceId}/users/u1/sessions/replayed`;
  const created = await t.request({
    method: 'POST',
    url: `/v1/spaces/${spaceId}/users/u1/sessions`,
    payload: { sessionId: 'replayed', state: { seed: 'from create', step: 0, 'user:lang': 'en' } },
  });
  expect(created.statusCode).toBe(201);
  liveAfter[0] = sessionScoped(created.json().state);
  for (const [index, actions] of deltas.entries()) {
    // A text-only event between the deltas: an event without actions replays as no change.
    const res = await t.request({
      method: 'POST',
      url: `${session}/events`,
      payload: { events: [{ author: 'agent', actions }, { author: 'user', content: { parts: [{ text: `turn ${index}` }] } }] },
    });
    expect(res.statusCode).toBe(201);
    const state = sessionScoped(res.json().session.state);
    liveAfter.push(state, state);
  }
});
afterAll(async () => t?.close());

describe('GET …/state-at/{seq}', () => {
  it('equals the live state right after every event of the history', async () => {
    for (let seq = 1; seq < liveAfter.length; seq++) {
      const res = await t.request({ method: 'GET', url: `${session}/state-at/${seq}` });
      expect(res.statusCode, `seq ${seq}`).toBe(200);
      expect(res.json().state, `seq ${seq}`).toEqual(liveAfter[seq]);
      expect(res.json().event.seq).toBe(seq);
      expect(res.json().initialStateKnown).toBe(true);
    }
  });

  it('lists what the event changed, and its delta to the shared scopes apart', async () => {
    const third = (await t.request({ method: 'GET', url: `${session}/state-at/3` })).json();
    expect(third.changes).toEqual([{ path: ['profile', 'city'], kind: 'added', after: 'Paris' }]);
    expect(third.sharedDelta).toEqual({ user: { 'user:plan': 'pro' }, app: { 'app:region': 'eu' } });

    const fifth = (await t.request({ method: 'GET', url: `${session}/state-at/5` })).json();
    expect(fifth.changes).toEqual([
      { path: ['profile', 'name'], kind: 'removed', before: 'Ada' },
      { path: ['profile', 'langs'], kind: 'changed', before: ['en'], after: ['en', 'fr'] },
      { path: ['cart'], kind: 'added', after: { items: 2 } },
    ]);
    // replace: the whole top-level value is replaced, not merged.
    const seventh = (await t.request({ method: 'GET', url: `${session}/state-at/7` })).json();
    expect(seventh.state.cart).toEqual({ total: 10 });
    const text = (await t.request({ method: 'GET', url: `${session}/state-at/8` })).json();
    expect(text.changes).toEqual([]);
  });

  it('answers 404 for a seq past the history, a missing session and another account, writing nothing', async () => {
    const stranger = await t.createAccount();
    const before = await tableFingerprints(t.db);
    const past = await t.request({ method: 'GET', url: `${session}/state-at/${liveAfter.length}` });
    expect([past.statusCode, past.json().error.code]).toEqual([404, 'ResourceNotFound.Event']);
    const missing = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users/u1/sessions/nope/state-at/1` });
    expect([missing.statusCode, missing.json().error.code]).toEqual([404, 'ResourceNotFound.Session']);
    const foreign = await t.request({ method: 'GET', url: `${session}/state-at/1`, token: stranger.rootCredential.token });
    expect([foreign.statusCode, foreign.json().error.code]).toEqual([404, 'ResourceNotFound.SessionSpace']);
    const zero = await t.request({ method: 'GET', url: `${session}/state-at/0` });
    expect([zero.statusCode, zero.json().error.code]).toEqual([400, 'InvalidParameter']);
    expect(await tableFingerprints(t.db)).toEqual(before);
  });

  it('is refused without session:DescribeEvents', async () => {
    const noEvents = await insertSubAccount(t.db, t.account.accountId, {
      statements: [{ effect: 'allow', actions: ['session:DescribeSessions'], resources: [`space/${spaceId}`] }],
    });
    const res = await t.request({ method: 'GET', url: `${session}/state-at/1`, token: noEvents.credential.token });
    expect([res.statusCode, res.json().error.code]).toEqual([403, 'UnauthorizedOperation']);
  });

  it('replays an imported session from {} and says its initial state is not known', async () => {
    const exported = (await t.request({ method: 'GET', url: `${session}/export` })).json();
    exported.session.sessionId = 'imported';
    const imported = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/sessions/import`, payload: exported });
    expect(imported.statusCode).toBe(201);
    const res = (await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users/u1/sessions/imported/state-at/1` })).json();
    expect(res.initialStateKnown).toBe(false);
    expect(res.state).toEqual({ step: 1, profile: { name: 'Ada', langs: ['en'] } });
  });
});
