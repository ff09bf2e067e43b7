import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const USER = 'user-1';

type Json = Record<string, unknown>;
type EventBody = Json & { seq: number; content?: { parts: { text?: string }[] }; truncated?: boolean };
type Key = { spaceId: string; sessionId: string };

const sessionUrl = (key: Key) => `/v1/spaces/${key.spaceId}/users/${USER}/sessions/${key.sessionId}`;
const contextUrl = (key: Key, query = '') => `${sessionUrl(key)}/context${query ? `?${query}` : ''}`;
const size = (event: unknown) => JSON.stringify(event).length;

async function newSession(spaceId = t.account.defaultSpaceId): Promise<Key> {
  const key = { spaceId, sessionId: `s-${randomUUID()}` };
  const res = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/${USER}/sessions`, payload: { sessionId: key.sessionId } });
  expect(res.statusCode, res.body).toBe(201);
  return key;
}

/** Appends the events in order; answers them as stored (with seq, eventId, createTime). */
async function append(key: Key, events: Json[]): Promise<EventBody[]> {
  const res = await t.request({ method: 'POST', url: `${sessionUrl(key)}/events`, payload: { events } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json().events;
}

const say = (text: string, author = 'user'): Json => ({ author, content: { role: author === 'user' ? 'user' : 'model', parts: [{ text }] } });
const call = (name: string, id: string): Json => ({ author: 'agent', content: { role: 'model', parts: [{ functionCall: { id, name, args: { q: 'x' } } }] } });
const reply = (name: string, id: string): Json => ({ author: 'agent', content: { role: 'user', parts: [{ functionResponse: { id, name, response: { ok: true } } }] } });

async function getContext(key: Key, query = '') {
  const res = await t.request({ method: 'GET', url: contextUrl(key, query) });
  expect(res.statusCode, res.body).toBe(200);
  return { res, body: res.json() as { session: Json & { revision: number }; memo: unknown; events: EventBody[]; window: { startSeq: number; endSeq: number; omittedEvents: number } } };
}

function putContext(key: Key, payload: unknown, headers: Record<string, string> = {}) {
  return t.request({ method: 'PUT', url: contextUrl(key), payload: payload as object, headers });
}

async function sessionRow(key: Key) {
  return t.db
    .selectFrom('sessions')
    .selectAll()
    .where('account_id', '=', t.account.accountId)
    .where('space_id', '=', key.spaceId)
    .where('session_id', '=', key.sessionId)
    .executeTakeFirst();
}

function expectError(res: { statusCode: number; json(): { error: { code: string; details?: { issues?: { field: string }[] } } } }, status: number, code: string, field?: string) {
  expect(res.statusCode).toBe(status);
  expect(res.json().error.code).toBe(code);
  if (field) expect(res.json().error.details?.issues?.map((issue) => issue.field)).toContain(field);
}

describe('GET …/sessions/{sessionId}/context', () => {
  it('answers the session, memo and every event when they fit, with the ETag', async () => {
    const key = await newSession();
    const stored = await append(key, [say('hello'), say('hi there', 'agent'), say('how are you?')]);
    const { res, body } = await getContext(key);
    expect(res.headers.etag).toBe('"2"');
    expect(body.events).toEqual(stored);
    expect(body.window).toEqual({ startSeq: 1, endSeq: 3, omittedEvents: 0 });
    expect(body.memo).toBeNull();
    const described = await t.request({ method: 'GET', url: sessionUrl(key) });
    expect(body.session).toEqual(described.json());
  });

  it('chooses the newest events that fit maxChars, answers them oldest first, and counts the rest exactly', async () => {
    const key = await newSession();
    const stored = await append(key, [1, 2, 3, 4, 5, 6].map((n) => say(`message number ${n} ${'.'.repeat(n * 10)}`)));
    const budget = size(stored[3]) + size(stored[4]) + size(stored[5]);
    const fits = (await getContext(key, `maxChars=${budget}`)).body;
    expect(fits.events.map((e) => e.seq)).toEqual([4, 5, 6]);
    expect(fits.window).toEqual({ startSeq: 4, endSeq: 6, omittedEvents: 3 });
    const short = (await getContext(key, `maxChars=${budget - 1}`)).body;
    expect(short.events.map((e) => e.seq)).toEqual([5, 6]);
    expect(short.window.omittedEvents).toBe(4);
  });

  it('stops at maxEvents', async () => {
    const key = await newSession();
    await append(key, [1, 2, 3, 4, 5].map((n) => say(`m${n}`)));
    const { body } = await getContext(key, 'maxEvents=2');
    expect(body.events.map((e) => e.seq)).toEqual([4, 5]);
    expect(body.window).toEqual({ startSeq: 4, endSeq: 5, omittedEvents: 3 });
  });

  it('keeps a function call and its response together, or drops both', async () => {
    const key = await newSession();
    await append(key, [say('weather?'), call('get_weather', 'c1'), reply('get_weather', 'c1'), say('It is sunny.', 'agent')]);
    const both = (await getContext(key, 'maxEvents=3')).body;
    expect(both.events.map((e) => e.seq)).toEqual([2, 3, 4]);
    // Room for the response but not its call: neither is returned.
    const neither = (await getContext(key, 'maxEvents=2')).body;
    expect(neither.events.map((e) => e.seq)).toEqual([4]);
    expect(neither.window).toEqual({ startSeq: 4, endSeq: 4, omittedEvents: 3 });
  });

  it('never answers a response whose call is outside the window, even when another call has its name', async () => {
    // Two parallel calls of one tool: the response to A must not be paired with the call B.
    const key = await newSession();
    await append(key, [call('get_weather', 'A'), call('get_weather', 'B'), reply('get_weather', 'A'), reply('get_weather', 'B')]);
    const cut = (await getContext(key, 'maxEvents=3')).body;
    expect(cut.events.map((e) => e.seq)).toEqual([4]);
    expect(cut.window).toEqual({ startSeq: 4, endSeq: 4, omittedEvents: 3 });
    expect((await putContext(key, { windowStartSeq: 2 })).statusCode).toBe(200);
    const fromTwo = (await getContext(key)).body;
    expect(fromTwo.events.map((e) => e.seq)).toEqual([4]);
    expect(fromTwo.window).toEqual({ startSeq: 4, endSeq: 4, omittedEvents: 2 });
  });

  it('truncates the newest event from the front of its text when it alone is over budget, without changing it', async () => {
    const key = await newSession();
    const long = `${'old words '.repeat(200)}the last sentence.`;
    const [, newest] = await append(key, [say('earlier'), say(long, 'agent')]);
    const { body } = await getContext(key, 'maxChars=400');
    expect(body.events).toHaveLength(1);
    const [event] = body.events;
    expect(event!.truncated).toBe(true);
    expect(size(event)).toBeLessThanOrEqual(400);
    const text = event!.content!.parts[0]!.text!;
    expect(text.length).toBeLessThan(long.length);
    expect(long.endsWith(text)).toBe(true);
    expect(text.endsWith('the last sentence.')).toBe(true);
    expect(body.window).toEqual({ startSeq: 2, endSeq: 2, omittedEvents: 1 });
    const storedNow = await t.request({ method: 'GET', url: `${sessionUrl(key)}/events/${newest!.eventId}` });
    expect(storedNow.json()).toEqual(newest);
  });

  it('shows the merged state: session keys plus the user\'s and the space\'s', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const key = await newSession(spaceId);
    await append(key, [{ ...say('remember me'), actions: { stateDelta: { topic: 'weather', 'user:name': 'Ann', 'app:version': 2, 'temp:x': 1 } } }]);
    const { body } = await getContext(key);
    expect(body.session.state).toEqual({ topic: 'weather', 'user:name': 'Ann', 'app:version': 2 });
    const put = await putContext(key, { memo: 'm' });
    expect(put.json().state).toEqual(body.session.state);
  });

  it('answers an empty window for a session without events', async () => {
    const key = await newSession();
    const { body } = await getContext(key);
    expect(body.events).toEqual([]);
    expect(body.window).toEqual({ startSeq: 1, endSeq: 0, omittedEvents: 0 });
  });

  it('reads a consistent snapshot while appends go on', async () => {
    const key = await newSession();
    await append(key, [say('start')]);
    const reads: Promise<Awaited<ReturnType<typeof getContext>>>[] = [];
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 10; i++) {
      writes.push(append(key, [say(`w${i}a`), say(`w${i}b`)]));
      reads.push(getContext(key, 'maxEvents=1000'));
    }
    await Promise.all(writes);
    for (const { res, body } of await Promise.all(reads)) {
      const count = body.session.eventCount as number;
      expect(body.window.endSeq).toBe(count);
      expect(body.events.map((e) => e.seq)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
      expect(res.headers.etag).toBe(`"${body.session.revision}"`);
    }
  });

  it('reads past the first page of events from one snapshot while appends go on', async () => {
    // With the default maxChars the first read asks for 101 events; these short events all fit, so
    // the read goes on past them (in a transaction) and must still see one snapshot.
    const key = await newSession();
    await append(key, Array.from({ length: 100 }, (_, i) => say(`early ${i}`)));
    await append(key, Array.from({ length: 20 }, (_, i) => say(`more ${i}`)));
    const reads: Promise<Awaited<ReturnType<typeof getContext>>>[] = [];
    const writes: Promise<unknown>[] = [];
    for (let i = 0; i < 10; i++) {
      writes.push(append(key, [say(`w${i}a`), say(`w${i}b`)]));
      reads.push(getContext(key, 'maxEvents=1000'));
    }
    await Promise.all(writes);
    for (const { res, body } of await Promise.all(reads)) {
      const count = body.session.eventCount as number;
      expect(count).toBeGreaterThan(101);
      expect(body.window).toEqual({ startSeq: 1, endSeq: count, omittedEvents: 0 });
      expect(body.events.map((e) => e.seq)).toEqual(Array.from({ length: count }, (_, i) => i + 1));
      expect(res.headers.etag).toBe(`"${body.session.revision}"`);
    }
  });

  it('answers 404 for a missing or expired session, a missing space and another account\'s session', async () => {
    const key = await newSession();
    expectError(await t.request({ method: 'GET', url: contextUrl({ ...key, sessionId: 'nope' }) }), 404, 'ResourceNotFound.Session');
    const otherSpace = { ...key, spaceId: `space-${randomUUID()}` };
    expectError(await t.request({ method: 'GET', url: contextUrl(otherSpace) }), 404, 'ResourceNotFound.SessionSpace');
    const other = await t.createAccount();
    expectError(await t.request({ method: 'GET', url: contextUrl(key), token: other.rootCredential.token }), 404, 'ResourceNotFound.SessionSpace');
    expectError(await t.request({ method: 'PUT', url: contextUrl(key), payload: { memo: 'x' }, token: other.rootCredential.token }), 404, 'ResourceNotFound.SessionSpace');
    expect((await sessionRow(key))!.memo).toBeNull();

    await t.db
      .updateTable('sessions')
      .set({ expire_time: sql<Date>`now() - interval '1 second'` })
      .where('account_id', '=', t.account.accountId)
      .where('session_id', '=', key.sessionId)
      .execute();
    expectError(await t.request({ method: 'GET', url: contextUrl(key) }), 404, 'ResourceNotFound.Session');
    const before = await sessionRow(key);
    expectError(await putContext(key, { memo: 'x' }), 404, 'ResourceNotFound.Session');
    expect(await sessionRow(key)).toEqual(before);
  });

  it('refuses bad budgets with 400 naming the parameter', async () => {
    const key = await newSession();
    for (const [query, field] of [
      ['maxChars=0', 'maxChars'],
      ['maxChars=10000001', 'maxChars'],
      ['maxChars=lots', 'maxChars'],
      ['maxEvents=0', 'maxEvents'],
      ['maxEvents=1001', 'maxEvents'],
      ['maxEvents=1.5', 'maxEvents'],
    ]) {
      const res = await t.request({ method: 'GET', url: contextUrl(key, query) });
      expect(res.statusCode, query).toBe(400);
      expectError(res, 400, 'InvalidParameter', field);
    }
  });
});

describe('PUT …/sessions/{sessionId}/context', () => {
  it('moves the window start: later reads start there and count omissions from there', async () => {
    const key = await newSession();
    await append(key, [1, 2, 3, 4, 5, 6].map((n) => say(`m${n}`)));
    const res = await putContext(key, { windowStartSeq: 3 });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ windowStartSeq: 3, revision: 3 });
    expect(res.headers.etag).toBe('"3"');
    const all = (await getContext(key)).body;
    expect(all.events.map((e) => e.seq)).toEqual([3, 4, 5, 6]);
    expect(all.window).toEqual({ startSeq: 3, endSeq: 6, omittedEvents: 0 });
    const two = (await getContext(key, 'maxEvents=2')).body;
    expect(two.window).toEqual({ startSeq: 5, endSeq: 6, omittedEvents: 2 });

    // eventCount + 1: nothing until the next event.
    expect((await putContext(key, { windowStartSeq: 7 })).statusCode).toBe(200);
    expect((await getContext(key)).body.window).toEqual({ startSeq: 7, endSeq: 6, omittedEvents: 0 });
    await append(key, [say('m7')]);
    expect((await getContext(key)).body.events.map((e) => e.seq)).toEqual([7]);
  });

  it('stores the memo, answers it on every read, and clears it with null', async () => {
    const key = await newSession();
    await append(key, [say('a'), say('b')]);
    const memo = { summary: 'The user asked about the weather.', facts: ['likes sun', 42, null], nested: { ok: true } };
    const put = await putContext(key, { memo, windowStartSeq: 2 });
    expect(put.statusCode, put.body).toBe(200);
    expect(put.json()).toMatchObject({ memo, windowStartSeq: 2 });
    const { body } = await getContext(key);
    expect(body.memo).toEqual(memo);
    expect(body.session.memo).toEqual(memo);
    expect((await sessionRow(key))!.memo).toEqual(memo);

    const scalar = await putContext(key, { memo: 'just a string' });
    expect(scalar.json().memo).toBe('just a string');
    const cleared = await putContext(key, { memo: null });
    expect(cleared.statusCode).toBe(200);
    expect(cleared.json()).toMatchObject({ memo: null, windowStartSeq: 2 });
    expect((await getContext(key)).body.memo).toBeNull();
  });

  it('applies If-Match: a stale revision is 412 with the current one and changes nothing', async () => {
    const key = await newSession();
    await append(key, [say('a')]);
    const before = await sessionRow(key);
    const stale = await putContext(key, { memo: 'new', windowStartSeq: 2 }, { 'if-match': '"1"' });
    expectError(stale, 412, 'FailedOperation.PreconditionFailed');
    expect(stale.json().error.details.currentRevision).toBe(2);
    expect(stale.headers.etag).toBe('"2"');
    expect(await sessionRow(key)).toEqual(before);

    const fresh = await putContext(key, { memo: 'new' }, { 'if-match': '"2"' });
    expect(fresh.statusCode).toBe(200);
    expect(fresh.json()).toMatchObject({ memo: 'new', revision: 3 });
    expect((await sessionRow(key))!.update_time.getTime()).toBeGreaterThanOrEqual(before!.update_time.getTime());
  });

  it('refuses bad bodies with 400 naming the field, and changes nothing', async () => {
    const key = await newSession();
    await append(key, [say('a'), say('b')]);
    const before = await sessionRow(key);
    const cases: [unknown, string][] = [
      [{}, 'body'],
      [{ windowStartSeq: 0 }, 'windowStartSeq'],
      [{ windowStartSeq: 1.5 }, 'windowStartSeq'],
      [{ windowStartSeq: '2' }, 'windowStartSeq'],
      [{ windowStartSeq: 4 }, 'windowStartSeq'], // eventCount + 2
      [{ memo: { text: 'x'.repeat(64 * 1024) } }, 'memo'],
      [{ memo: 'ok', title: 'not here' }, 'title'],
    ];
    for (const [payload, field] of cases) {
      const res = await putContext(key, payload);
      expect(res.statusCode, JSON.stringify(payload).slice(0, 80)).toBe(400);
      expectError(res, 400, 'InvalidParameter');
      expect(JSON.stringify(res.json().error.details ?? res.json().error.message)).toContain(field);
    }
    expect(await sessionRow(key)).toEqual(before);
  });

  it('answers 404 for a missing session and changes nothing', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const key = await newSession(spaceId);
    expectError(await putContext({ ...key, sessionId: 'missing' }, { memo: 1 }), 404, 'ResourceNotFound.Session');
    expectError(await putContext({ spaceId: `space-${randomUUID()}`, sessionId: key.sessionId }, { memo: 1 }), 404, 'ResourceNotFound.SessionSpace');
    expect((await sessionRow(key))!.revision).toBe(1);
  });
});
