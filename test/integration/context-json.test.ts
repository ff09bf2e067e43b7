// The context read and describe send JSON that PostgreSQL wrote. These tests hold that text to the
// answer the TypeScript views give for the same rows (toSessionView, toEventView and
// selectContextWindow over every event from windowStartSeq on: what the API answered before):
// same values and keys, and the same window at every budget boundary, for varied events.
import { randomUUID } from 'node:crypto';
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactJsonLength } from '../../src/lib/json-measure.js';
import { selectContextWindow, serializedSize } from '../../src/modules/context/context-window.js';
import { toEventView } from '../../src/modules/events/event.model.js';
import { toSessionView } from '../../src/modules/sessions/session.model.js';
import { findLiveSessionWithSharedState } from '../../src/modules/sessions/sessions.repository.js';
import { insertSpace } from '../support/fixtures.js';
import { type TestApp, createTestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const USER = 'user-json';
type Key = { accountId: string; spaceId: string; userId: string; sessionId: string };
const sessionUrl = (key: Key) => `/v1/spaces/${key.spaceId}/users/${key.userId}/sessions/${key.sessionId}`;

/** The answer of the views in TypeScript, from the rows (every event from windowStartSeq on). */
async function expectedContext(key: Key, budget: { maxChars: number; maxEvents: number }) {
  const row = await findLiveSessionWithSharedState(t.db, key);
  if (!row) throw new Error('no session');
  const session = toSessionView(row, { user: row.user_state, app: row.app_state });
  const rows = await t.db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .where('seq', '>=', session.windowStartSeq)
    .orderBy('seq')
    .execute();
  const window = selectContextWindow(rows.map(toEventView), { ...budget, windowStartSeq: session.windowStartSeq });
  return {
    session,
    memo: session.memo,
    events: window.events,
    window: { startSeq: window.startSeq, endSeq: window.endSeq, omittedEvents: window.omittedEvents },
  };
}

async function readContext(key: Key, budget: { maxChars: number; maxEvents: number }) {
  const res = await t.request({ method: 'GET', url: `${sessionUrl(key)}/context?maxChars=${budget.maxChars}&maxEvents=${budget.maxEvents}` });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
  const body = res.json();
  expect(res.headers.etag).toBe(`"${body.session.revision}"`);
  return body;
}

const part = (text: string) => ({ text });
const unicode = 'Grüße 😀 中文 «quotes» "double" \\back\\slash\\ tab\there\nnew line \u0001\u001f \u2028 ∑';

/** A session with every kind of event, field and state the views shape, some of it written straight into the rows. */
async function variedSession(): Promise<Key> {
  const spaceId = await insertSpace(t.db, t.account.accountId);
  const key: Key = { accountId: t.account.accountId, spaceId, userId: USER, sessionId: `json-${randomUUID()}` };
  const created = await t.request({
    method: 'POST',
    url: `/v1/spaces/${spaceId}/users/${USER}/sessions`,
    payload: { sessionId: key.sessionId, title: `title ${unicode}`, metadata: { env: 'prod', 'example.com/agent': 'a-1' }, ttlSeconds: 3600, state: { topic: 'weather', 'user:name': 'Ann' } },
  });
  expect(created.statusCode, created.body).toBe(201);
  const events = [
    { author: 'user', content: { role: 'user', parts: [part(unicode)] } },
    {
      author: 'agent',
      invocationId: 'inv-1',
      content: { role: 'model', parts: [part('thinking'), { functionCall: { id: 'c1', name: 'get_weather', args: { city: 'Zürich', days: 3, ratio: 1.5, big: 1e21, tiny: 1.5e-7, neg: -0.25, list: [1, 'two', null, true] } } }] },
      metadata: { model: 'm-1', tokens: 12 },
    },
    { author: 'tool', content: { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'get_weather', response: { ok: true, forecast: ['sun', 'rain'] } } }] } },
    { author: 'agent', content: { role: 'model', parts: [{ functionCall: { name: 'lookup', args: {} } }, { functionCall: { id: 'c2', name: 'other', args: { q: 'x' } } }] } },
    { author: 'tool', content: { role: 'user', parts: [{ functionResponse: { name: 'lookup', response: { found: false } } }, { functionResponse: { id: 'c2', name: 'other', response: { r: 1 } } }] } },
    { author: 'agent', content: { role: 'model', parts: [{ text: 'secret plan', thought: true }, { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }] } },
    {
      author: 'agent',
      actions: { stateDelta: { topic: 'sun', 'user:city': 'Zürich', 'app:version': 2, 'temp:scratch': 1 }, stateDeltaMode: 'merge-patch' },
      extensions: { trace: { id: 't-1' } },
      errorCode: 'E_TIMEOUT',
      errorMessage: `timed out ${unicode}`,
      timestamp: '2024-02-29T23:59:59.5+05:30',
    },
    { author: 'user', timestamp: '0099-01-02T03:04:05.006Z' },
    { author: 'user', content: { role: 'user', parts: [part(`${'a long message '.repeat(40)}the end`)] } },
  ];
  const appended = await t.request({ method: 'POST', url: `${sessionUrl(key)}/events`, payload: { events } });
  expect(appended.statusCode, appended.body).toBe(201);
  const memo = await t.request({ method: 'PUT', url: `${sessionUrl(key)}/context`, payload: { memo: { note: unicode, n: [1, 2.5], nested: { deep: null } } } });
  expect(memo.statusCode, memo.body).toBe(200);

  // What only a direct write can leave: stray keys in the wrong scope (the views must not show
  // them), jsonb numbers as PostgreSQL keeps them (1.50, 1.0), a timestamp with microseconds.
  const byKey = sql`account_id = ${key.accountId} AND space_id = ${key.spaceId}`;
  await sql`UPDATE sessions SET state = state || '{"user:stray": 1, "app:stray": 2, "temp:stray": 3, "n": 1.50}'::jsonb WHERE ${byKey} AND session_id = ${key.sessionId}`.execute(t.db);
  await sql`UPDATE space_users SET state = state || '{"leak": 1, "app:wrong": 2}'::jsonb WHERE ${byKey} AND user_id = ${key.userId}`.execute(t.db);
  await sql`UPDATE session_spaces SET state = state || '{"leak2": 1, "user:wrong": 2}'::jsonb WHERE ${byKey}`.execute(t.db);
  await sql`UPDATE events SET metadata = '{"exact": 1.50, "whole": 1.0, "e": 12345678901234567890}'::jsonb, event_time = '2024-01-01 00:00:00.123789+00'
    WHERE ${byKey} AND session_id = ${key.sessionId} AND seq = 1`.execute(t.db);
  return key;
}

describe('context and describe as PostgreSQL writes them', () => {
  let key: Key;
  beforeAll(async () => {
    key = await variedSession();
  });

  it('answers the same session, state view, memo and events as the TypeScript views', async () => {
    const budget = { maxChars: 100_000, maxEvents: 100 };
    const body = await readContext(key, budget);
    expect(body).toStrictEqual(await expectedContext(key, budget));
    expect(body.events).toHaveLength(9);
    // The merged view leaves out the stray keys and `temp:`; the memo and expiry are there.
    expect(body.session.state).toStrictEqual({ topic: 'sun', n: 1.5, 'user:name': 'Ann', 'user:city': 'Zürich', 'app:version': 2 });
    expect(body.session.expireTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(body.events[0].timestamp).toBe('2024-01-01T00:00:00.123Z');
    expect(body.events[7].timestamp).toBe('0099-01-02T03:04:05.006Z');
    expect(body.events[6].timestamp).toBe('2024-02-29T18:29:59.500Z');
  });

  it('describes the session as the TypeScript view does, with the ETag', async () => {
    const res = await t.request({ method: 'GET', url: sessionUrl(key) });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const row = await findLiveSessionWithSharedState(t.db, key);
    expect(res.json()).toStrictEqual(toSessionView(row!, { user: row!.user_state, app: row!.app_state }));
    expect(res.headers.etag).toBe(`"${row!.revision}"`);
  });

  it('chooses the same window at every budget boundary: sizes are JSON.stringify\'s, whatever PostgreSQL wrote', async () => {
    const all = (await expectedContext(key, { maxChars: 10_000_000, maxEvents: 1000 })).events;
    const sizes = all.map(serializedSize);
    for (let newest = 1; newest <= all.length; newest++) {
      const chars = sizes.slice(-newest).reduce((sum, size) => sum + size, 0);
      for (const budget of [
        { maxChars: chars, maxEvents: 100 },
        { maxChars: chars - 1, maxEvents: 100 },
        { maxChars: 100_000, maxEvents: newest },
      ]) {
        expect(await readContext(key, budget), JSON.stringify(budget)).toStrictEqual(await expectedContext(key, budget));
      }
    }
  });

  it('truncates a newest event over budget as the TypeScript selection does', async () => {
    for (const maxChars of [1, 150, 300, 500]) {
      const budget = { maxChars, maxEvents: 10 };
      const body = await readContext(key, budget);
      expect(body.events[0].truncated).toBe(true);
      expect(body).toStrictEqual(await expectedContext(key, budget));
    }
  });

  it('counts from windowStartSeq, also when the read pages on in a snapshot', async () => {
    const put = await t.request({ method: 'PUT', url: `${sessionUrl(key)}/context`, payload: { windowStartSeq: 3 } });
    expect(put.statusCode, put.body).toBe(200);
    // maxChars 2,000 makes the first page 3 events; the budget holds more, so the read pages on.
    for (const budget of [
      { maxChars: 100_000, maxEvents: 100 },
      { maxChars: 2_000, maxEvents: 1000 },
      { maxChars: 600, maxEvents: 1000 },
      { maxChars: 100_000, maxEvents: 2 },
    ]) {
      const body = await readContext(key, budget);
      expect(body, JSON.stringify(budget)).toStrictEqual(await expectedContext(key, budget));
      expect(body.events.every((event: { seq: number }) => event.seq >= 3)).toBe(true);
    }
  });

  it('answers an empty window and a null memo as the views do', async () => {
    const created = await t.request({ method: 'POST', url: `/v1/spaces/${key.spaceId}/users/${USER}/sessions`, payload: {} });
    expect(created.statusCode).toBe(201);
    const empty = { ...key, sessionId: created.json().sessionId };
    const body = await readContext(empty, { maxChars: 100, maxEvents: 10 });
    expect(body).toStrictEqual(await expectedContext(empty, { maxChars: 100, maxEvents: 10 }));
    expect(body.memo).toBeNull();
    expect(body.session.expireTime).toBeNull();
  });
});

describe('compactJsonLength on jsonb text', () => {
  it('counts what JSON.stringify of the parsed value would, for values as jsonb writes them', async () => {
    const storable = fc.string({ unit: fc.constantFrom('a', 'é', '"', '\\', '\n', '\u0001', '😀', ' ', ',', ':') });
    const value = fc.letrec((tie) => ({
      json: fc.oneof(
        { depthSize: 'small' },
        storable,
        fc.double({ noNaN: true, noDefaultInfinity: true }),
        fc.boolean(),
        fc.constant(null),
        fc.array(tie('json'), { maxLength: 4 }),
        fc.dictionary(storable, tie('json'), { maxKeys: 4 }),
      ),
    })).json;
    await fc.assert(
      fc.asyncProperty(fc.dictionary(storable, value, { maxKeys: 5 }), async (object) => {
        const { rows } = await sql<{ text: string }>`SELECT ${JSON.stringify(object)}::jsonb::text AS text`.execute(t.db);
        const text = rows[0]!.text;
        // What JSON.stringify writes for the value jsonb holds: the generated value itself (jsonb
        // keeps its keys, strings and numbers; only the order of keys and the spacing differ, which
        // do not change the compact length). Not JSON.parse(text): Node 24.21's JSON.parse can give
        // a key the text of an earlier one (after {"\\": 1}, {"\n": 1} comes back as {"\\": 1}),
        // and a CI seed hit that (README.md, "Known: Node 24.21's JSON.parse", has the reproduction).
        expect(compactJsonLength(text)).toBe(JSON.stringify(object).length);
      }),
      { numRuns: 150 },
    );
  });
});
