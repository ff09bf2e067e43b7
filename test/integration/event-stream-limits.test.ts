// GET …/events/stream under a tenant that opens many streams or loses its rights (issue 21): the
// caps per account and per instance, and their slots given back however a stream ends; the end of
// a stream within one heartbeat of a revocation, naming the code a new request would get; the
// maximum lifetime, after which the TypeScript client reconnects without losing or repeating an
// event; and one events read per session per wake-up, however many streams follow it.
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { AgentSessionClient } from '../../clients/typescript/src/index.js';
import type { PolicyStatementValue } from '../../src/lib/policy.js';
import { insertSpace } from '../support/fixtures.js';
import { databaseSnapshot, insertSubAccount, readOnlyOn } from '../support/principals.js';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { openSse, type SseStream } from '../support/sse-reader.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const apps: TestApp[] = [];
afterAll(async () => {
  await Promise.all(apps.map((app) => app.close()));
});

interface Served {
  t: TestApp;
  base: string;
  spaceId: string;
  newSession(): Promise<string>;
  append(session: string, ...texts: string[]): Promise<void>;
  metric(name: string, labels?: Record<string, string>): Promise<number>;
}

async function serve(options: Parameters<typeof createTestApp>[0]): Promise<Served> {
  const t = await createTestApp({ ...options, limits: { rateLimitMax: 0, ...options?.limits } });
  apps.push(t);
  const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
  const spaceId = await insertSpace(t.db, t.account.accountId);
  let counter = 0;
  return {
    t,
    base: `${address}/v1`,
    spaceId,
    async newSession() {
      const sessionId = `s-${++counter}`;
      const res = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/u1/sessions`, payload: { sessionId } });
      expect(res.statusCode).toBe(201);
      return `/spaces/${spaceId}/users/u1/sessions/${sessionId}`;
    },
    async append(session, ...texts) {
      const events = texts.map((text) => ({ author: 'agent', content: { role: 'model', parts: [{ text }] } }));
      const res = await t.request({ method: 'POST', url: `/v1${session}/events`, payload: { events } });
      expect(res.statusCode).toBe(201);
    },
    async metric(name, labels = {}) {
      const res = await t.request({ method: 'GET', url: '/metrics', token: null });
      return sampleValue(parsePrometheusText(res.body), name, labels);
    },
  };
}

describe('the caps on open streams', () => {
  let s: Served;
  const open: SseStream[] = [];
  beforeAll(async () => {
    s = await serve({ eventStreamHeartbeatMs: 100, limits: { eventStreamsPerAccount: 3, eventStreamsPerInstance: 5 } });
  });
  afterEach(() => open.splice(0).forEach((stream) => stream.close()));
  const follow = async (session: string, token: string) => {
    const stream = await openSse(`${s.base}${session}/events/stream`, token);
    open.push(stream);
    return stream;
  };
  const refusedAsLimit = (stream: SseStream, cap: 'account' | 'instance') => {
    expect([stream.status, stream.errorBody?.error.code, stream.headers.get('retry-after')]).toEqual([429, 'RequestLimitExceeded', '5']);
    expect(stream.errorBody?.error.message).toContain(cap === 'account' ? 'An account may have at most 3' : 'This instance serves at most 5');
  };

  it('answers 429 RequestLimitExceeded with Retry-After past the account cap and past the instance cap, writing nothing', async () => {
    const session = await s.newSession();
    const a = s.t.account.rootCredential.token;
    for (let i = 0; i < 3; i++) expect((await follow(session, a)).status).toBe(200);
    // A second credential of the same account shares the account's cap.
    const sub = await insertSubAccount(s.t.db, s.t.account.accountId, { statements: readOnlyOn(s.spaceId) });
    const before = await databaseSnapshot(s.t.db);
    refusedAsLimit(await follow(session, sub.credential.token), 'account');
    refusedAsLimit(await follow(session, a), 'account');
    expect(await databaseSnapshot(s.t.db)).toEqual(before);

    // Another account has its own cap, but the instance's is shared: 3 + 2 = 5.
    const other = await s.t.createAccount();
    const otherSpace = await insertSpace(s.t.db, other.accountId);
    const created = await s.t.request({ method: 'POST', url: `/v1/spaces/${otherSpace}/users/u1/sessions`, payload: { sessionId: 'b' }, token: other.rootCredential.token });
    expect(created.statusCode).toBe(201);
    const otherSession = `/spaces/${otherSpace}/users/u1/sessions/b`;
    for (let i = 0; i < 2; i++) expect((await follow(otherSession, other.rootCredential.token)).status).toBe(200);
    refusedAsLimit(await follow(otherSession, other.rootCredential.token), 'instance');
    expect(await s.metric('event_streams_open')).toBe(5);
  });

  it('gives the slot back when the client closes the stream', async () => {
    const session = await s.newSession();
    const a = s.t.account.rootCredential.token;
    const streams = [await follow(session, a), await follow(session, a), await follow(session, a)];
    refusedAsLimit(await follow(session, a), 'account');
    streams[0]!.close();
    await expect.poll(() => s.metric('event_streams_open'), { timeout: 5_000 }).toBe(2);
    expect((await follow(session, a)).status).toBe(200);
  });

  it('gives the slots back when the server ends the streams (the session is deleted)', async () => {
    const session = await s.newSession();
    const a = s.t.account.rootCredential.token;
    const streams = [await follow(session, a), await follow(session, a), await follow(session, a)];
    refusedAsLimit(await follow(session, a), 'account');
    expect((await s.t.request({ method: 'DELETE', url: `/v1${session}` })).statusCode).toBe(204);
    for (const stream of streams) expect((await stream.untilEnd()).at(-1)).toMatchObject({ event: 'end', data: '{"reason":"ResourceNotFound.Session"}' });
    expect(await s.metric('event_streams_open')).toBe(0);
    const next = await s.newSession();
    for (let i = 0; i < 3; i++) expect((await follow(next, a)).status).toBe(200);
  });

  it('gives the slot back when opening fails (a missing session answers 404 and holds nothing)', async () => {
    const a = s.t.account.rootCredential.token;
    // The streams of the tests before are closed by their clients: the server sees it shortly after.
    await expect.poll(() => s.metric('event_streams_open'), { timeout: 5_000 }).toBe(0);
    for (let i = 0; i < 4; i++) {
      const missing = await follow(`/spaces/${s.spaceId}/users/u1/sessions/no-such`, a);
      expect([missing.status, missing.errorBody?.error.code]).toEqual([404, 'ResourceNotFound.Session']);
    }
    expect(await s.metric('event_streams_open')).toBe(0);
  });
});

describe('a revoked principal', () => {
  const HEARTBEAT_MS = 300;
  // The end frame comes at the first heartbeat after the change; the slack is for a loaded machine.
  const WITHIN_MS = HEARTBEAT_MS + 250;
  let s: Served;
  beforeAll(async () => {
    s = await serve({ eventStreamHeartbeatMs: HEARTBEAT_MS });
  });

  const revocations: Array<[string, (sub: Awaited<ReturnType<typeof insertSubAccount>>) => Promise<number>, string]> = [
    ['its credential is deleted', async (sub) => (await s.t.request({ method: 'DELETE', url: `/v1/iam/credentials/${sub.credential.secretId}` })).statusCode, 'AuthFailure'],
    ['its sub-account is deleted', async (sub) => (await s.t.request({ method: 'DELETE', url: `/v1/iam/subaccounts/${sub.principalId}` })).statusCode, 'AuthFailure'],
    [
      'its policy now denies the space',
      async (sub) => {
        const statements: PolicyStatementValue[] = [...readOnlyOn(s.spaceId), { effect: 'deny', actions: ['session:DescribeEvents'], resources: [`space/${s.spaceId}`] }];
        return (await s.t.request({ method: 'PUT', url: `/v1/iam/subaccounts/${sub.principalId}/policy`, payload: { statements } })).statusCode;
      },
      'UnauthorizedOperation',
    ],
  ];

  it.each(revocations)('ends the stream within one heartbeat when %s, naming the code a new request gets', async (_, revoke, code) => {
    const session = await s.newSession();
    await s.append(session, 'before');
    const sub = await insertSubAccount(s.t.db, s.t.account.accountId, { statements: readOnlyOn(s.spaceId) });
    const stream = await openSse(`${s.base}${session}/events/stream`, sub.credential.token);
    expect(stream.status).toBe(200);
    expect((await stream.events(1)).map((event) => event.seq)).toEqual([1]);
    // Past a heartbeat first: the stream is checked and still allowed.
    await new Promise((resolve) => setTimeout(resolve, HEARTBEAT_MS * 1.5));
    await s.append(session, 'still allowed');
    expect((await stream.events(1)).map((event) => event.seq)).toEqual([2]);

    expect([200, 204]).toContain(await revoke(sub));
    const revokedAt = Date.now();
    const frames = await stream.untilEnd();
    const elapsed = Date.now() - revokedAt;
    expect(frames.at(-1)).toEqual({ event: 'end', data: JSON.stringify({ reason: code }) });
    expect(elapsed).toBeLessThan(WITHIN_MS);

    const fresh = await openSse(`${s.base}${session}/events/stream`, sub.credential.token);
    expect([fresh.status, fresh.errorBody?.error.code]).toEqual([code === 'AuthFailure' ? 401 : 403, code]);
    expect(await s.metric('event_streams_open')).toBe(0);
  });

  it('makes the TypeScript client throw the revocation code instead of reconnecting', async () => {
    const session = await s.newSession();
    await s.append(session, 'seen');
    const sub = await insertSubAccount(s.t.db, s.t.account.accountId, { statements: readOnlyOn(s.spaceId) });
    const client = new AgentSessionClient({ baseUrl: s.base.replace(/\/v1$/, ''), credential: sub.credential.token });
    const received: number[] = [];
    const reading = (async () => {
      for await (const event of client.streamEvents({ spaceId: s.spaceId, userId: 'u1', sessionId: session.split('/').pop()! })) {
        received.push(event.seq);
        const deleted = await s.t.request({ method: 'DELETE', url: `/v1/iam/credentials/${sub.credential.secretId}` });
        expect(deleted.statusCode).toBe(204);
      }
    })();
    await expect(reading).rejects.toMatchObject({ name: 'AgentSessionError', code: 'AuthFailure' });
    expect(received).toEqual([1]);
  });

  it('keeps the stream of a principal still allowed open past several heartbeats', async () => {
    const session = await s.newSession();
    const sub = await insertSubAccount(s.t.db, s.t.account.accountId, { statements: readOnlyOn(s.spaceId) });
    const stream = await openSse(`${s.base}${session}/events/stream`, sub.credential.token);
    const heartbeats: string[] = [];
    while (heartbeats.length < 3) {
      const frame = await stream.next();
      expect(frame?.event).toBeUndefined();
      if (frame?.comment === 'heartbeat') heartbeats.push(frame.comment);
    }
    await s.append(session, 'live');
    expect((await stream.events(1)).map((event) => event.seq)).toEqual([1]);
    stream.close();
  });
});

describe('the maximum lifetime', () => {
  const LIFETIME_MS = 1_000;
  let s: Served;
  beforeAll(async () => {
    s = await serve({ eventStreamHeartbeatMs: 60_000, limits: { eventStreamLifetimeMs: LIFETIME_MS } });
  });

  it('ends a stream after it with the reason StreamLifetimeExceeded', async () => {
    const session = await s.newSession();
    const stream = await openSse(`${s.base}${session}/events/stream`, s.t.account.rootCredential.token);
    const openedAt = Date.now();
    const frames = await stream.untilEnd();
    expect(frames.at(-1)).toEqual({ event: 'end', data: '{"reason":"StreamLifetimeExceeded"}' });
    expect(Date.now() - openedAt).toBeGreaterThanOrEqual(LIFETIME_MS - 50);
    expect(await s.metric('event_streams_open')).toBe(0);
  });

  it('the TypeScript client reconnects with Last-Event-ID and gets every event once, in order', async () => {
    const session = await s.newSession();
    const sessionId = session.split('/').pop()!;
    const opened: Array<string | null> = [];
    const client = new AgentSessionClient({
      baseUrl: s.base.replace(/\/v1$/, ''),
      credential: s.t.account.rootCredential.token,
      fetch: (input, init) => {
        if (String(input).endsWith('/events/stream')) opened.push(new Headers(init?.headers).get('last-event-id'));
        return globalThis.fetch(input, init);
      },
    });
    const controller = new AbortController();
    const received: number[] = [];
    const reading = (async () => {
      for await (const event of client.streamEvents({ spaceId: s.spaceId, userId: 'u1', sessionId }, { signal: controller.signal })) {
        received.push(event.seq);
        if (received.length === 12) controller.abort();
      }
    })();
    // 12 appends over ~2.6 s: the stream is ended twice on the way, some appends land between an end and the reconnect.
    for (let i = 1; i <= 12; i++) {
      await s.append(session, `e${i}`);
      await new Promise((resolve) => setTimeout(resolve, 220));
    }
    await reading;
    expect(received).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(opened.length).toBeGreaterThanOrEqual(3);
    expect(opened[0]).toBe('0');
    // Each reconnect names a seq the client had received: never ahead of it, never before the last one.
    for (const lastEventId of opened.slice(1)) expect(received).toContain(Number(lastEventId));
  });
});

describe('the streams of one session', () => {
  it('cost one events read per wake-up, however many streams follow it', async () => {
    // No heartbeat and no poll during the test: the only wake-ups are this instance's appends.
    const s = await serve({ eventStreamHeartbeatMs: 600_000, eventStreamPollMs: 0 });
    const session = await s.newSession();
    await s.append(session, 'stored');
    const token = s.t.account.rootCredential.token;
    const streams = await Promise.all(Array.from({ length: 20 }, () => openSse(`${s.base}${session}/events/stream`, token)));
    // One behind the others: it opens at seq 0 with Last-Event-ID and must still get event 1 first.
    for (const stream of streams) expect((await stream.events(1)).map((event) => event.seq)).toEqual([1]);
    // Each stream read its history once; once all 20 have, every one reads with the others.
    await expect.poll(() => s.metric('event_stream_reads_total', { kind: 'catch_up' })).toBe(20);
    const shared = await s.metric('event_stream_reads_total', { kind: 'shared' });

    for (let i = 2; i <= 6; i++) {
      await s.append(session, `live ${i}`);
      const got = await Promise.all(streams.map(async (stream) => (await stream.events(1))[0]!.seq));
      expect(got).toEqual(Array(20).fill(i));
    }
    expect(await s.metric('event_stream_reads_total', { kind: 'shared' })).toBe(shared + 5);
    expect(await s.metric('event_stream_reads_total', { kind: 'catch_up' })).toBe(20);

    // A late stream from an old Last-Event-ID catches up alone, then joins: nothing skipped or repeated.
    const late = await openSse(`${s.base}${session}/events/stream`, token, { 'last-event-id': '2' });
    expect((await late.events(4)).map((event) => event.seq)).toEqual([3, 4, 5, 6]);
    await s.append(session, 'to all 21');
    expect((await late.events(1)).map((event) => event.seq)).toEqual([7]);
    const got = await Promise.all(streams.map(async (stream) => (await stream.events(1))[0]!.seq));
    expect(got).toEqual(Array(20).fill(7));
    [...streams, late].forEach((stream) => stream.close());
  });

  it('lets a stream that cannot keep up fall behind and catch up alone, without skipping or repeating an event', async () => {
    const s = await serve({ eventStreamHeartbeatMs: 600_000, eventStreamPollMs: 0 });
    const session = await s.newSession();
    const token = s.t.account.rootCredential.token;
    const fast = await openSse(`${s.base}${session}/events/stream`, token);
    const slow = await openSse(`${s.base}${session}/events/stream`, token);
    await expect.poll(() => s.metric('event_stream_reads_total', { kind: 'catch_up' })).toBe(2);

    // 24 MB while the slow client reads nothing: more than the socket buffers hold, so its writes
    // wait for 'drain' and the shared read goes on without it.
    const big = (i: number) => `${i} `.padEnd(200_000, 'x');
    const fastSeqs: number[] = [];
    for (let i = 0; i < 120; i += 4) {
      await s.append(session, big(i), big(i + 1), big(i + 2), big(i + 3));
      fastSeqs.push(...(await fast.events(4)).map((event) => event.seq));
    }
    expect(fastSeqs).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));

    const slowSeqs = (await slow.events(120)).map((event) => event.seq);
    expect(slowSeqs).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    expect(await s.metric('event_stream_reads_total', { kind: 'catch_up' })).toBeGreaterThan(2);
    // Back in the shared read: the next event reaches both.
    await s.append(session, 'after');
    expect([(await fast.events(1))[0]!.seq, (await slow.events(1))[0]!.seq]).toEqual([121, 121]);
    fast.close();
    slow.close();
  });
});
