// GET …/events/stream (issue 13): the stored events after a seq, then each new one live, resumable
// with Last-Event-ID; authorized like the events list; many open streams hold no pool connections;
// a shutdown ends every open stream. Served over a real socket: streaming does not go through
// app.inject.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { createAppendPath } from '../../src/modules/events/append.service.js';
import { insertSpace } from '../support/fixtures.js';
import { insertSubAccount, readOnlyOn } from '../support/principals.js';
import { openSse, type SseStream } from '../support/sse-reader.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const POOL_MAX = 3;
let t: TestApp;
let base: string;
let spaceId: string;
let counter = 0;

beforeAll(async () => {
  // A heartbeat far beyond any test's wait: every live event here arrives through the feed (this
  // instance's own appends at once, others' by its poll).
  t = await createTestApp({ poolMax: POOL_MAX, eventStreamHeartbeatMs: 600_000, eventStreamPollMs: 100, limits: { rateLimitMax: 0 } });
  const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
  base = `${address}/v1`;
  spaceId = await insertSpace(t.db, t.account.accountId);
});
afterAll(async () => t?.close());

const token = () => t.account.rootCredential.token;

async function newSession(): Promise<string> {
  const sessionId = `s-${++counter}`;
  const res = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/u1/sessions`, payload: { sessionId } });
  expect(res.statusCode).toBe(201);
  return `/spaces/${spaceId}/users/u1/sessions/${sessionId}`;
}

async function append(session: string, ...texts: string[]): Promise<void> {
  const events = texts.map((text) => ({ author: 'agent', content: { role: 'model', parts: [{ text }] } }));
  const res = await t.request({ method: 'POST', url: `/v1${session}/events`, payload: { events } });
  expect(res.statusCode).toBe(201);
}

const texts = (events: Array<{ body: Record<string, unknown> }>) =>
  events.map((event) => ((event.body.content as { parts: Array<{ text: string }> }).parts[0]!.text));

describe('GET …/events/stream', () => {
  it('sends the stored events, then each appended one live, with its seq as the SSE id', async () => {
    const session = await newSession();
    await append(session, 'one', 'two');
    const stream = await openSse(`${base}${session}/events/stream`, token());
    expect(stream.status).toBe(200);
    const stored = await stream.events(2);
    expect(stored.map((event) => event.seq)).toEqual([1, 2]);
    expect(texts(stored)).toEqual(['one', 'two']);
    expect(stored[0]!.body).toMatchObject({ seq: 1, author: 'agent' });

    await append(session, 'three');
    await append(session, 'four', 'five');
    const live = await stream.events(3);
    expect(live.map((event) => event.seq)).toEqual([3, 4, 5]);
    expect(texts(live)).toEqual(['three', 'four', 'five']);
    stream.close();
  });

  it('delivers appends made by another instance through its poll of the event counts', async () => {
    const session = await newSession();
    const stream = await openSse(`${base}${session}/events/stream`, token());
    // The service's append called directly on the database, as another instance's request would:
    // nothing in this app is told of it, so only the feed's poll can bring it to the stream.
    const key = { accountId: t.account.accountId, spaceId, userId: 'u1', sessionId: session.split('/').pop()! };
    const otherInstance = createAppendPath(t.db, DEFAULT_LIMITS);
    const elsewhere = (text: string) => otherInstance.append(key, { author: 'other-instance', content: { role: 'model', parts: [{ text }] } }, undefined);
    await elsewhere('from far away');
    expect(texts(await stream.events(1))).toEqual(['from far away']);
    await elsewhere('again');
    await append(session, 'and here');
    const next = await stream.events(2);
    expect(next.map((event) => event.seq)).toEqual([2, 3]);
    expect(texts(next)).toEqual(['again', 'and here']);
    stream.close();
  });

  it('resumes right after Last-Event-ID, which takes precedence over afterSeq', async () => {
    const session = await newSession();
    await append(session, 'a', 'b', 'c', 'd');
    const resumed = await openSse(`${base}${session}/events/stream?afterSeq=1`, token(), { 'last-event-id': '3' });
    expect((await resumed.events(1)).map((event) => event.seq)).toEqual([4]);
    await append(session, 'e');
    expect((await resumed.events(1)).map((event) => event.seq)).toEqual([5]);
    resumed.close();

    const fromQuery = await openSse(`${base}${session}/events/stream?afterSeq=2`, token());
    expect((await fromQuery.events(3)).map((event) => event.seq)).toEqual([3, 4, 5]);
    fromQuery.close();
  });

  it('answers a bad Last-Event-ID with 400 naming the header', async () => {
    const session = await newSession();
    const stream = await openSse(`${base}${session}/events/stream`, token(), { 'last-event-id': 'seven' });
    expect(stream.status).toBe(400);
    expect(stream.errorBody!.error.code).toBe('InvalidParameter');
    expect(stream.errorBody!.error.message).toContain('last-event-id');
  });

  it('answers the event whose eventId is "stream" to a client that accepts JSON and not an event stream', async () => {
    const session = await newSession();
    const missing = await fetch(`${base}${session}/events/stream`, { headers: { authorization: `Bearer ${token()}`, accept: 'application/json' } });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe('ResourceNotFound.Event');
    const res = await t.request({ method: 'POST', url: `/v1${session}/events`, payload: { eventId: 'stream', author: 'agent' } });
    expect(res.statusCode).toBe(201);
    for (const accept of ['application/json', 'application/json, text/plain', 'application/*;q=0.5', 'application/json, text/event-stream;q=0']) {
      const described = await fetch(`${base}${session}/events/stream`, { headers: { authorization: `Bearer ${token()}`, accept } });
      expect(described.status, accept).toBe(200);
      expect(described.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(await described.json()).toEqual(res.json().events[0]);
    }
    // No Accept, EventSource's and curl's: the stream, which starts with the stored event.
    for (const accept of [undefined, 'text/event-stream', '*/*', 'application/json, text/event-stream', 'application/json, */*;q=0.1']) {
      const stream = await openSse(`${base}${session}/events/stream`, token(), accept ? { accept } : {});
      try {
        expect(stream.headers.get('content-type'), accept).toMatch(/^text\/event-stream/);
        expect((await stream.events(1)).map((event) => event.seq)).toEqual([1]);
      } finally {
        stream.close();
      }
    }
  });

  it('answers hostile afterSeq and Last-Event-ID values with a 4xx envelope or a stream, never a 5xx', async () => {
    const session = await newSession();
    const value = fc.oneof(fc.string({ maxLength: 30 }), fc.integer().map(String), fc.constantFrom('-1', '1e3', '9007199254740993', ' 1', '0x10', ''));
    await fc.assert(
      fc.asyncProperty(value, fc.option(value, { nil: undefined }), async (afterSeq, lastEventId) => {
        const headers: Record<string, string> = lastEventId === undefined || /[^\x20-\x7e]/.test(lastEventId) ? {} : { 'last-event-id': lastEventId };
        const stream = await openSse(`${base}${session}/events/stream?afterSeq=${encodeURIComponent(afterSeq)}`, token(), headers);
        stream.close();
        expect(stream.status === 200 || (stream.status === 400 && stream.errorBody?.error.code === 'InvalidParameter'), `${stream.status} ${JSON.stringify(stream.errorBody)}`).toBe(true);
      }),
      { numRuns: 60 },
    );
  });

  it('is authorized like the events list', async () => {
    const session = await newSession();
    const missing = await openSse(`${base}${session}/events/stream`, undefined);
    expect([missing.status, missing.errorBody!.error.code]).toEqual([401, 'AuthFailure']);

    const otherSpace = await insertSpace(t.db, t.account.accountId, 'other');
    const reader = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(otherSpace) });
    const refused = await openSse(`${base}${session}/events/stream`, reader.credential.token);
    expect([refused.status, refused.errorBody!.error.code]).toEqual([403, 'UnauthorizedOperation']);

    const allowed = await insertSubAccount(t.db, t.account.accountId, { statements: readOnlyOn(spaceId) });
    await append(session, 'visible');
    const stream = await openSse(`${base}${session}/events/stream`, allowed.credential.token);
    expect(texts(await stream.events(1))).toEqual(['visible']);
    stream.close();

    const stranger = await t.createAccount();
    const foreign = await openSse(`${base}${session}/events/stream`, stranger.rootCredential.token);
    expect([foreign.status, foreign.errorBody!.error.code]).toEqual([404, 'ResourceNotFound.SessionSpace']);

    const gone = await openSse(`${base}/spaces/${spaceId}/users/u1/sessions/no-such/events/stream`, token());
    expect([gone.status, gone.errorBody!.error.code]).toEqual([404, 'ResourceNotFound.Session']);
  });

  it(`keeps 50 streams open on a pool of ${POOL_MAX} connections: requests still go through, every stream gets the event`, async () => {
    const session = await newSession();
    const streams: SseStream[] = [];
    for (let i = 0; i < 50; i++) streams.push(await openSse(`${base}${session}/events/stream`, token()));
    expect(streams.every((stream) => stream.status === 200)).toBe(true);

    // While they are open: ordinary requests are served, and the pool never grows past its size.
    const reads = await Promise.all(Array.from({ length: 20 }, () => t.request({ method: 'GET', url: `/v1${session}` })));
    expect(reads.map((res) => res.statusCode)).toEqual(Array(20).fill(200));
    // A stream holds no connection between events: with every request answered, the pool soon
    // has none checked out (the event feed's poll takes one only for its short query).
    await expect.poll(() => t.database.pool.totalCount - t.database.pool.idleCount, { interval: 5, timeout: 5_000 }).toBe(0);

    await append(session, 'to everyone');
    const received = await Promise.all(streams.map(async (stream) => texts(await stream.events(1))[0]));
    expect(received).toEqual(Array(50).fill('to everyone'));
    streams.forEach((stream) => stream.close());
  });
});

describe('a deleted session', () => {
  it('ends the stream with an end frame at the next heartbeat', async () => {
    const own = await createTestApp({ eventStreamHeartbeatMs: 50 });
    try {
      const address = await own.app.listen({ port: 0, host: '127.0.0.1' });
      const space = await insertSpace(own.db, own.account.accountId);
      const session = `/spaces/${space}/users/u1/sessions/s1`;
      expect((await own.request({ method: 'POST', url: `/v1/spaces/${space}/users/u1/sessions`, payload: { sessionId: 's1' } })).statusCode).toBe(201);
      const stream = await openSse(`${address}/v1${session}/events/stream`, own.account.rootCredential.token);
      expect(stream.status).toBe(200);
      expect((await own.request({ method: 'DELETE', url: `/v1${session}` })).statusCode).toBe(204);
      const frames = await stream.untilEnd();
      expect(frames.at(-1)).toMatchObject({ event: 'end', data: '{"reason":"ResourceNotFound.Session"}' });
    } finally {
      await own.close();
    }
  });
});

describe('shutdown', () => {
  it('ends every open stream, and the app closes', async () => {
    const own = await createTestApp({ eventStreamHeartbeatMs: 60_000 });
    try {
      const address = await own.app.listen({ port: 0, host: '127.0.0.1' });
      const space = await insertSpace(own.db, own.account.accountId);
      const session = `/spaces/${space}/users/u1/sessions/s1`;
      expect((await own.request({ method: 'POST', url: `/v1/spaces/${space}/users/u1/sessions`, payload: { sessionId: 's1' } })).statusCode).toBe(201);
      const streams = await Promise.all(Array.from({ length: 5 }, () => openSse(`${address}/v1${session}/events/stream`, own.account.rootCredential.token)));
      expect(streams.map((stream) => stream.status)).toEqual(Array(5).fill(200));
      await Promise.all(streams.map((stream) => stream.next())); // the retry frame: each stream is open
      const closing = own.app.close();
      const ends = await Promise.all(streams.map((stream) => stream.untilEnd()));
      expect(ends.every((frames) => frames.every((frame) => frame.event !== 'event'))).toBe(true);
      await closing;
      expect(own.app.server.listening).toBe(false);
    } finally {
      await own.database.dispose();
    }
  });
});

describe('the test reader (sse-reader.ts)', () => {
  // The shutdown test above relies on it: an end there must be the server's close, not a reset.
  it('resolves at a clean end and rejects on a connection reset', async () => {
    const server = http.createServer((request, response) => {
      response.writeHead(200, { 'content-type': 'text/event-stream' });
      response.write('id: 1\nevent: event\ndata: {}\n\n');
      if (request.url === '/reset') setTimeout(() => request.socket.destroy(), 20);
      else setTimeout(() => response.end(), 20);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      expect(await (await openSse(`${url}/end`, undefined)).untilEnd()).toEqual([{ id: '1', event: 'event', data: '{}' }]);
      await expect((await openSse(`${url}/reset`, undefined)).untilEnd()).rejects.toThrow();
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
