import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/db/schema.js';
import { applyScopedDelta, mergedStateView } from '../../src/modules/state/index.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { APPEND_MODES } from '../support/append-modes.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// Small limits so that every limit can be reached with small requests.
const LIMITS = { batchEvents: 5, stateDeltaDepth: 4, stateDeltaBytes: 256, eventBytes: 2048, stateBytes: 1024 };

// Replays and If-Match run in every append mode (APPEND_MODES), each with an app of its own: the
// helpers below use the current one.
let t: TestApp;

const USER = 'user-1';

async function newSession(state: JsonObject = {}): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId }, { state });
  return sessionId;
}

const eventsUrl = (sessionId: string, spaceId = t.account.defaultSpaceId) => `/v1/spaces/${spaceId}/users/${USER}/sessions/${sessionId}/events`;

function append(sessionId: string, payload: unknown, headers: Record<string, string> = {}) {
  return t.request({ method: 'POST', url: eventsUrl(sessionId), payload: payload as object, headers });
}

/** The session row and its events as stored, to prove that a failed request changed nothing. */
async function snapshot(sessionId: string) {
  const session = await t.db
    .selectFrom('sessions')
    .selectAll()
    .where('account_id', '=', t.account.accountId)
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  const events = await t.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', t.account.accountId)
    .where('session_id', '=', sessionId)
    .orderBy('seq')
    .execute();
  return { session, events };
}

describe.each(APPEND_MODES)('$name', (mode) => {
  beforeAll(async () => {
    t = await createTestApp({ limits: { ...LIMITS, ...mode.limits } });
  });
  afterAll(async () => t.close());

  describe('POST …/events: one event', () => {
    it('stores the event with seq 1, applies its delta and bumps eventCount, revision and updateTime', async () => {
      const sessionId = await newSession({ keep: true });
      const before = await snapshot(sessionId);
      const res = await append(sessionId, { author: 'user', content: { role: 'user', parts: [{ text: 'hi' }] }, actions: { stateDelta: { turn: 1 } } });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body.events).toHaveLength(1);
      const [event] = body.events;
      expect(event).toEqual({
        seq: 1,
        eventId: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/),
        author: 'user',
        content: { role: 'user', parts: [{ text: 'hi' }] },
        actions: { stateDelta: { turn: 1 } },
        timestamp: event.createTime,
        createTime: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      });
      expect(body.session).toMatchObject({ sessionId, userId: USER, eventCount: 1, revision: before.session.revision + 1, state: { keep: true, turn: 1 } });
      expect(res.headers.etag).toBe(`"${before.session.revision + 1}"`);

      const after = await snapshot(sessionId);
      expect(after.session.state).toEqual({ keep: true, turn: 1 });
      expect(after.session.event_count).toBe(1);
      expect(after.session.update_time.toISOString()).toBe(event.createTime);
      expect(after.events.map((e) => [e.seq, e.event_id])).toEqual([[1, event.eventId]]);
    });

    it('keeps every field of the ADK shape and the client timestamp, and omits absent fields', async () => {
      const sessionId = await newSession();
      const full = {
        eventId: 'evt-full:1',
        invocationId: 'inv-1',
        author: 'weather_agent',
        content: {
          role: 'model',
          parts: [
            { text: 'thinking…', thought: true },
            { functionCall: { id: 'call-1', name: 'get_weather', args: { city: 'Paris' } } },
            { functionResponse: { id: 'call-1', name: 'get_weather', response: { tempC: 21 } } },
            { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } },
          ],
        },
        actions: { stateDelta: { city: 'Paris' }, stateDeltaMode: 'merge-patch' },
        metadata: { trace: 'abc' },
        extensions: { 'example.com/x': { y: [1, 2] } },
        errorCode: 'E_TOOL',
        errorMessage: 'tool was slow',
        timestamp: '2026-03-01T10:20:30.123+02:00',
      };
      const res = await append(sessionId, full);
      expect(res.statusCode).toBe(201);
      const { timestamp: _sent, ...rest } = full;
      expect(res.json().events[0]).toEqual({ ...rest, seq: 1, timestamp: '2026-03-01T08:20:30.123Z', createTime: expect.any(String) });

      const minimal = await append(sessionId, { author: 'user' });
      expect(Object.keys(minimal.json().events[0]).sort()).toEqual(['author', 'createTime', 'eventId', 'seq', 'timestamp']);
    });

    it('answers a conditional append: matching If-Match appends, a stale one is 412 and changes nothing', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const ok = await append(sessionId, { author: 'user' }, { 'if-match': `"${before.session.revision}"` });
      expect(ok.statusCode).toBe(201);

      const mid = await snapshot(sessionId);
      const stale = await append(sessionId, { author: 'user', actions: { stateDelta: { x: 1 } } }, { 'if-match': `"${before.session.revision}"` });
      expect(stale.statusCode).toBe(412);
      expect(stale.json().error).toMatchObject({ code: 'FailedOperation.PreconditionFailed', details: { currentRevision: mid.session.revision } });
      expect(await snapshot(sessionId)).toEqual(mid);
    });
  });

  describe('POST …/events: batches', () => {
    it('appends a batch in order with consecutive seqs, applies the deltas in order and bumps the revision once', async () => {
      const sessionId = await newSession({ n: 0 });
      const before = await snapshot(sessionId);
      const res = await append(sessionId, {
        events: [
          { author: 'user', actions: { stateDelta: { n: 1, a: 'x' } } },
          { author: 'agent', actions: { stateDelta: { n: 2, a: null } } },
          { author: 'agent', actions: { stateDelta: { n: 3, list: [1] } } },
        ],
      });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body.events.map((e: { seq: number; author: string }) => [e.seq, e.author])).toEqual([
        [1, 'user'],
        [2, 'agent'],
        [3, 'agent'],
      ]);
      expect(body.session).toMatchObject({ eventCount: 3, revision: before.session.revision + 1, state: { n: 3, list: [1] } });
      expect((await snapshot(sessionId)).events.map((e) => e.seq)).toEqual([1, 2, 3]);
    });

    it("gives a batch's session, user: and app: state what its deltas give one after the other, folded into one step or not", async () => {
      // foldedDocuments (append-plan.ts) sends the deltas of a batch as one merge-patch step where
      // that gives the same state; these batches fold (first two) and do not (last two).
      const u = `user:k-${randomUUID()}`;
      const p = `app:k-${randomUUID()}`;
      type Step = { stateDelta: JsonObject; stateDeltaMode?: 'merge-patch' | 'replace' };
      const batches: Step[][] = [
        [{ stateDelta: { a: 1, [u]: 1 } }, { stateDelta: { a: 2, b: 'x', [u]: null, [p]: [1] } }, { stateDelta: { b: null, c: true, [p]: 'y' } }],
        [{ stateDelta: { a: 1, keep: 0 }, stateDeltaMode: 'replace' }, { stateDelta: { a: null, [u]: 2 } }, { stateDelta: { a: 3, [u]: 'z' }, stateDeltaMode: 'replace' }],
        [{ stateDelta: { a: { x: 1 }, [u]: { x: 1 } } }, { stateDelta: { a: { y: 2 }, [u]: { y: null } } }],
        [{ stateDelta: { a: 1, [p]: 1 } }, { stateDelta: { a: null, [p]: null }, stateDeltaMode: 'replace' }],
      ];
      // A space and user of its own: the user: and app: keys written here stay out of the other tests' states.
      const spaceId = await insertSpace(t.db, t.account.accountId);
      for (const steps of batches) {
        const initial = { a: 0, b: 'old', keep: 1 };
        const sessionId = `s-${randomUUID()}`;
        await insertSession(t.db, { accountId: t.account.accountId, spaceId, userId: 'fold-user', sessionId }, { state: initial });
        const url = `/v1/spaces/${spaceId}/users/fold-user/sessions/${sessionId}`;
        const post = (payload: object) => t.request({ method: 'POST', url: `${url}/events`, payload });
        const shared = (await post({ author: 'agent', actions: { stateDelta: { [u]: 'before', [p]: 'before' } } })).json().session.state;
        const res = await post({ events: steps.map((actions) => ({ author: 'agent', actions })) });
        expect(res.statusCode, res.body).toBe(201);
        const start = { session: initial as JsonObject, user: { [u]: shared[u] }, app: { [p]: shared[p] } };
        const expected = mergedStateView(steps.reduce((states, step) => applyScopedDelta(states, step.stateDelta, step.stateDeltaMode), start));
        const state = res.json().session.state as JsonObject;
        const ours = (view: JsonObject) => Object.fromEntries(Object.entries(view).filter(([key]) => !key.includes(':') || key === u || key === p));
        expect(ours(state)).toEqual(ours(expected));
        expect(ours((await t.request({ method: 'GET', url })).json().state)).toEqual(ours(expected));
      }
    });

    it('applies a replace-mode delta: top-level keys replaced whole, null stored as a value', async () => {
      const sessionId = await newSession({ profile: { name: 'Ada', lang: 'en' }, keep: 1, gone: 'x' });
      const res = await append(sessionId, { author: 'agent', actions: { stateDelta: { profile: { lang: 'fr' }, gone: null }, stateDeltaMode: 'replace' } });
      expect(res.statusCode).toBe(201);
      const expected = { profile: { lang: 'fr' }, keep: 1, gone: null };
      expect(res.json().session.state).toEqual(expected);
      expect((await snapshot(sessionId)).session.state).toEqual(expected);

      const merged = await append(sessionId, { author: 'agent', actions: { stateDelta: { profile: { name: 'Bo' }, gone: null } } });
      expect(merged.json().session.state).toEqual({ profile: { lang: 'fr', name: 'Bo' }, keep: 1 });
    });

    it('writes nothing when the third event of a batch reuses an eventId with another payload (409)', async () => {
      const sessionId = await newSession();
      await append(sessionId, { eventId: 'taken', author: 'user', content: { parts: [{ text: 'original' }] } });
      const before = await snapshot(sessionId);
      const res = await append(sessionId, {
        events: [
          { author: 'user', actions: { stateDelta: { a: 1 } } },
          { author: 'agent', actions: { stateDelta: { b: 1 } } },
          { eventId: 'taken', author: 'user', content: { parts: [{ text: 'changed' }] } },
        ],
      });
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'InvalidParameter.EventIdDuplicate', details: { field: 'events[2].eventId' } });
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('writes nothing when the third event of a batch makes the state too large (413)', async () => {
      const sessionId = await newSession({ keep: 'k'.repeat(500) });
      const before = await snapshot(sessionId);
      const chunk = 'x'.repeat(200);
      const res = await append(sessionId, {
        events: [
          { author: 'user', actions: { stateDelta: { a: chunk } } },
          { author: 'agent', actions: { stateDelta: { b: chunk } } },
          { author: 'agent', actions: { stateDelta: { c: chunk } } },
        ],
      });
      expect(res.statusCode).toBe(413);
      expect(res.json().error.code).toBe('LimitExceeded.State');
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('refuses a batch of limits.batchEvents + 1 events', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const events = Array.from({ length: LIMITS.batchEvents + 1 }, () => ({ author: 'user' }));
      const res = await append(sessionId, { events });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'InvalidParameter', details: { issues: [{ field: 'events' }] } });
      expect(await snapshot(sessionId)).toEqual(before);

      const full = await append(sessionId, { events: events.slice(1) });
      expect(full.statusCode).toBe(201);
    });

    it('refuses an empty batch', async () => {
      const sessionId = await newSession();
      const res = await append(sessionId, { events: [] });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.details.issues[0].field).toBe('events');
    });
  });

  describe('POST …/events: idempotent replay', () => {
    it('answers a retry with the same payload with the stored event (200), without applying its delta again', async () => {
      const sessionId = await newSession({ count: 0 });
      const event = { eventId: 'evt-1', author: 'user', actions: { stateDelta: { count: 1, log: ['a'] } }, metadata: { a: 1, b: 2 } };
      const first = await append(sessionId, event);
      expect(first.statusCode).toBe(201);
      await append(sessionId, { author: 'agent', actions: { stateDelta: { count: 2 } } });
      const before = await snapshot(sessionId);

      // Same payload with its keys in another order is the same event.
      const retry = await append(sessionId, { metadata: { b: 2, a: 1 }, actions: { stateDelta: { log: ['a'], count: 1 } }, author: 'user', eventId: 'evt-1' });
      expect(retry.statusCode).toBe(200);
      expect(retry.json().events).toEqual(first.json().events);
      expect(retry.json().session).toMatchObject({ revision: before.session.revision, eventCount: 2, state: { count: 2, log: ['a'] } });
      expect(retry.headers.etag).toBe(`"${before.session.revision}"`);
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('answers a retried batch with the stored events even when its If-Match is now stale', async () => {
      const sessionId = await newSession();
      const start = await snapshot(sessionId);
      const batch = { events: [{ eventId: 'b-1', author: 'user' }, { eventId: 'b-2', author: 'agent', actions: { stateDelta: { done: true } } }] };
      const first = await append(sessionId, batch, { 'if-match': `"${start.session.revision}"` });
      expect(first.statusCode).toBe(201);
      const before = await snapshot(sessionId);
      const retry = await append(sessionId, batch, { 'if-match': `"${start.session.revision}"` });
      expect(retry.statusCode).toBe(200);
      expect(retry.json().events).toEqual(first.json().events);
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('answers a retry with the stored event even when applying its delta again would now exceed the state limit', async () => {
      const sessionId = await newSession();
      const event = { eventId: 'big', author: 'user', actions: { stateDelta: { a: 'x'.repeat(200) } } };
      const first = await append(sessionId, event);
      expect(first.statusCode).toBe(201);
      // The state grows to 829 bytes without `a`: with it again it would be 1036, over the 1024 limit.
      await append(sessionId, { author: 'agent', actions: { stateDelta: { a: null, b: 'y'.repeat(200) } } });
      for (const key of ['c', 'd', 'e']) expect((await append(sessionId, { author: 'agent', actions: { stateDelta: { [key]: 'z'.repeat(200) } } })).statusCode).toBe(201);
      const before = await snapshot(sessionId);
      const fresh = await append(sessionId, { ...event, eventId: 'big-again' });
      expect(fresh.statusCode).toBe(413);
      expect(fresh.json().error.code).toBe('LimitExceeded.State');

      const retry = await append(sessionId, event);
      expect(retry.statusCode).toBe(200);
      expect(retry.json().events).toEqual(first.json().events);
      expect(retry.json().session).toMatchObject({ revision: before.session.revision, eventCount: 5 });
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('answers a different payload under a stored eventId with 409 InvalidParameter.EventIdDuplicate', async () => {
      const sessionId = await newSession();
      await append(sessionId, { eventId: 'evt-1', author: 'user', actions: { stateDelta: { a: 1 } } });
      const before = await snapshot(sessionId);
      const res = await append(sessionId, { eventId: 'evt-1', author: 'user', actions: { stateDelta: { a: 2 } } });
      expect(res.statusCode).toBe(409);
      expect(res.json().error).toMatchObject({ code: 'InvalidParameter.EventIdDuplicate', details: { eventId: 'evt-1' } });
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('mixes replays and new events in one batch: only the new ones are written and applied', async () => {
      const sessionId = await newSession({ n: 0 });
      const first = await append(sessionId, { eventId: 'old', author: 'user', actions: { stateDelta: { n: 1, old: true } } });
      await append(sessionId, { author: 'user', actions: { stateDelta: { old: null } } });
      const res = await append(sessionId, {
        events: [
          { eventId: 'old', author: 'user', actions: { stateDelta: { n: 1, old: true } } },
          { eventId: 'new', author: 'agent', actions: { stateDelta: { n: 2 } } },
        ],
      });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body.events[0]).toEqual(first.json().events[0]);
      expect(body.events[1]).toMatchObject({ seq: 3, eventId: 'new' });
      expect(body.session.state).toEqual({ n: 2 });
      expect((await snapshot(sessionId)).events.map((e) => e.event_id)).toEqual(['old', expect.any(String), 'new']);
    });

    it('treats a repeated eventId inside one batch like a stored one: same payload once, other payload 409', async () => {
      const sessionId = await newSession();
      const twice = { eventId: 'dup', author: 'user', actions: { stateDelta: { hits: [1] } } };
      const same = await append(sessionId, { events: [twice, twice] });
      expect(same.statusCode).toBe(201);
      expect(same.json().events.map((e: { seq: number }) => e.seq)).toEqual([1, 1]);
      expect((await snapshot(sessionId)).events).toHaveLength(1);

      const before = await snapshot(sessionId);
      const clash = await append(sessionId, { events: [{ eventId: 'x', author: 'user' }, { eventId: 'x', author: 'agent' }] });
      expect(clash.statusCode).toBe(409);
      expect(clash.json().error).toMatchObject({ code: 'InvalidParameter.EventIdDuplicate', details: { field: 'events[1].eventId' } });
      expect(await snapshot(sessionId)).toEqual(before);
    });
  });

  describe('POST …/events: validation and limits', () => {
    it('names the bad field of a batch and of a single event', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const batch = await append(sessionId, { events: [{ author: 'a' }, { author: 'b' }, { author: 'c' }, { content: { parts: [] } }] });
      expect(batch.statusCode).toBe(400);
      expect(batch.json().error.code).toBe('MissingParameter');
      expect(batch.json().error.details.issues).toEqual([{ field: 'events[3].author', message: expect.any(String) }]);

      const single = await append(sessionId, { author: 'a', eventId: 'bad id!' });
      expect(single.statusCode).toBe(400);
      expect(single.json().error).toMatchObject({ code: 'InvalidParameter', details: { issues: [{ field: 'eventId' }] } });

      const unknown = await append(sessionId, { author: 'a', surprise: 1 });
      expect(unknown.statusCode).toBe(400);
      expect(unknown.json().error.code).toBe('InvalidParameter');

      const emptyPart = await append(sessionId, { author: 'a', content: { parts: [{}] } });
      expect(emptyPart.statusCode).toBe(400);
      expect(emptyPart.json().error.details.issues[0].field).toBe('content.parts[0]');

      const badMode = await append(sessionId, { events: [{ author: 'a', actions: { stateDelta: {}, stateDeltaMode: 'patch' } }] });
      expect(badMode.statusCode).toBe(400);
      expect(badMode.json().error.details.issues[0].field).toBe('events[0].actions.stateDeltaMode');
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('refuses a stateDelta nested too deeply with 400 InvalidParameter.StateDelta', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const ok = { a: { b: { c: { d: 1 } } } }; // depth 4 = the limit
      const tooDeep = { a: { b: { c: { d: { e: 1 } } } } };
      const res = await append(sessionId, { events: [{ author: 'a', actions: { stateDelta: ok } }, { author: 'a', actions: { stateDelta: tooDeep } }] });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'InvalidParameter.StateDelta', details: { issues: [{ field: 'events[1].actions.stateDelta' }] } });
      expect(await snapshot(sessionId)).toEqual(before);
      expect((await append(sessionId, { author: 'a', actions: { stateDelta: ok } })).statusCode).toBe(201);
    });

    it('refuses a stateDelta larger than the limit with 400 InvalidParameter.StateDelta', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const res = await append(sessionId, { author: 'a', actions: { stateDelta: { big: 'x'.repeat(LIMITS.stateDeltaBytes) } } });
      expect(res.statusCode).toBe(400);
      expect(res.json().error).toMatchObject({ code: 'InvalidParameter.StateDelta', details: { issues: [{ field: 'actions.stateDelta' }] } });
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('refuses an event larger than the limit with 413 LimitExceeded.Event', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const res = await append(sessionId, { events: [{ author: 'a' }, { author: 'a', content: { parts: [{ text: 'x'.repeat(LIMITS.eventBytes) }] } }] });
      expect(res.statusCode).toBe(413);
      expect(res.json().error).toMatchObject({ code: 'LimitExceeded.Event', details: { field: 'events[1]' } });
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('refuses a delta that makes the state larger than the limit with 413 LimitExceeded.State', async () => {
      const sessionId = await newSession({ base: 'y'.repeat(LIMITS.stateBytes - 150) });
      const before = await snapshot(sessionId);
      const res = await append(sessionId, { author: 'a', actions: { stateDelta: { more: 'x'.repeat(200) } } });
      expect(res.statusCode).toBe(413);
      expect(res.json().error.code).toBe('LimitExceeded.State');
      expect(await snapshot(sessionId)).toEqual(before);
      // A delta that shrinks the state below the limit again is fine.
      expect((await append(sessionId, { author: 'a', actions: { stateDelta: { base: null, more: 'x' } } })).statusCode).toBe(201);
    });

    it('answers a timestamp that is no RFC 3339 instant with one issue, not also "out of range", and stores nothing', async () => {
      const sessionId = await newSession();
      for (const timestamp of ['2026-12-31T23:59:60Z', '+010000-01-01T00:00:00Z', 'yesterday']) {
        const res = await append(sessionId, { author: 'a', timestamp });
        expect(res.statusCode, timestamp).toBe(400);
        expect(res.json().error.details.issues, timestamp).toEqual([{ field: 'timestamp', message: 'Invalid ISO datetime' }]);
      }
      const res = await append(sessionId, { author: 'a', timestamp: '0000-12-31T23:59:59Z' });
      expect(res.json().error.details.issues).toEqual([{ field: 'timestamp', message: 'must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59.999Z' }]);
      const session = await t.db.selectFrom('sessions').select('event_count').where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(session.event_count).toBe(0);
    });

    it('answers a body nested thousands of levels deep with a 400, not a crash', async () => {
      const sessionId = await newSession();
      // Written by hand: JSON.stringify itself cannot go this deep.
      const payload = `{"author":"a","metadata":{"deep":${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}}}`;
      const res = await t.request({ method: 'POST', url: eventsUrl(sessionId), payload, headers: { 'content-type': 'application/json' } });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter');
    });
  });

  describe('POST …/events: not found', () => {
    it('answers 404 ResourceNotFound.Session for an unknown or expired session', async () => {
      const unknown = await append('no-such-session', { author: 'a' });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json().error.code).toBe('ResourceNotFound.Session');

      const sessionId = await newSession();
      await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('session_id', '=', sessionId).execute();
      const before = await snapshot(sessionId);
      const expired = await append(sessionId, { author: 'a', actions: { stateDelta: { a: 1 } } });
      expect(expired.statusCode).toBe(404);
      expect(expired.json().error.code).toBe('ResourceNotFound.Session');
      expect(await snapshot(sessionId)).toEqual(before);
    });

    it('answers 404 ResourceNotFound.SessionSpace for an unknown space', async () => {
      const res = await t.request({ method: 'POST', url: eventsUrl('s', `space-${randomUUID()}`), payload: { author: 'a' } });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SessionSpace');
    });

    it('answers 404 to another account and writes nothing', async () => {
      const sessionId = await newSession();
      const before = await snapshot(sessionId);
      const other = await t.createAccount();
      const res = await t.request({ method: 'POST', url: eventsUrl(sessionId), payload: { author: 'intruder' }, token: other.rootCredential.token });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SessionSpace');
      // Even in its own space, the other account cannot reach this session id.
      const own = await t.request({ method: 'POST', url: eventsUrl(sessionId, other.defaultSpaceId), payload: { author: 'intruder' }, token: other.rootCredential.token });
      expect(own.statusCode).toBe(404);
      expect(own.json().error.code).toBe('ResourceNotFound.Session');
      expect(await snapshot(sessionId)).toEqual(before);
    });
  });
});
