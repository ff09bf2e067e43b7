// The client's retry rules and eventId assignment, against a fetch the test controls: no server.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  AgentSessionClient,
  type AppendEvent,
  AgentSessionError,
  backoffDelayMs,
  OPERATIONS,
  parseRetryAfterMs,
  retryDelayMs,
  withEventIds,
} from '../../clients/typescript/src/index.js';

const POLICY = { maxRetries: 3, baseDelayMs: 100, maxDelayMs: 1_000 };

describe('backoff', () => {
  it('draws uniformly below base · 2^retry, capped at maxDelayMs', () => {
    expect([0, 1, 2, 3, 4].map((retry) => backoffDelayMs(retry, POLICY, () => 0.999_999))).toEqual([99, 199, 399, 799, 999]);
    expect(backoffDelayMs(2, POLICY, () => 0.5)).toBe(200);
    expect(backoffDelayMs(2, POLICY, () => 0)).toBe(0);
  });

  it('reads Retry-After as seconds or as an HTTP date, and ignores what it cannot read', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfterMs('2', now)).toBe(2_000);
    expect(parseRetryAfterMs(' 0 ', now)).toBe(0);
    expect(parseRetryAfterMs('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5_000);
    expect(parseRetryAfterMs('Wed, 31 Dec 2025 23:59:00 GMT', now)).toBe(0);
    expect(parseRetryAfterMs('soon', now)).toBeUndefined();
    expect(parseRetryAfterMs(null, now)).toBeUndefined();
  });

  it('waits what Retry-After says (capped), and the jittered backoff without it', () => {
    expect(retryDelayMs(0, POLICY, 700, () => 0.5)).toBe(700);
    expect(retryDelayMs(0, POLICY, 5_000, () => 0.5)).toBe(1_000);
    expect(retryDelayMs(1, POLICY, undefined, () => 0.5)).toBe(100);
  });
});

describe('eventIds', () => {
  it('gives every event without an eventId a new one and keeps the caller’s', () => {
    let n = 0;
    const newId = () => `id-${++n}`;
    expect(withEventIds({ author: 'user' }, newId)).toEqual({ author: 'user', eventId: 'id-1' });
    expect(withEventIds({ events: [{ author: 'a', eventId: 'mine' }, { author: 'b' }] }, newId)).toEqual({
      events: [{ author: 'a', eventId: 'mine' }, { author: 'b', eventId: 'id-2' }],
    });
  });

  it('generates UUIDs by default', () => {
    expect(withEventIds<AppendEvent>({ author: 'user' }).eventId).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });
});

/** A fetch that answers from `script` in turn (an Error is thrown, as fetch does for a network failure) and records each request. */
function scriptedFetch(script: (Response | Error)[]) {
  const requests: { url: string; init: RequestInit }[] = [];
  const fetch = async (url: string | URL | Request, init?: RequestInit) => {
    requests.push({ url: String(url), init: init ?? {} });
    const next = script.shift();
    if (next === undefined) throw new Error('script exhausted');
    if (next instanceof Error) throw next;
    return next;
  };
  return { fetch: fetch as typeof globalThis.fetch, requests };
}
const json = (status: number, body: unknown, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json; charset=utf-8', ...headers } });
const appended = { events: [], session: {} };
const unavailable = () => json(503, { error: { code: 'ServiceUnavailable', message: 'busy', requestId: 'r1' } }, { 'retry-after': '3' });

function clientWith(fetch: typeof globalThis.fetch, sleeps: number[], maxRetries = 3) {
  return new AgentSessionClient({
    baseUrl: 'http://service.test/',
    credential: 'key.secret',
    fetch,
    retry: { maxRetries, baseDelayMs: 100, maxDelayMs: 10_000 },
    sleep: async (ms) => void sleeps.push(ms),
    random: () => 0.5,
  });
}
const where = { spaceId: 'space-1', userId: 'u1', sessionId: 's1' };

describe('AgentSessionClient retries', () => {
  it('assigns an eventId once, before the first attempt, and sends the same body on every retry', async () => {
    const { fetch, requests } = scriptedFetch([new TypeError('fetch failed'), unavailable(), json(201, appended)]);
    const sleeps: number[] = [];
    await clientWith(fetch, sleeps).appendEvents(where, { events: [{ author: 'user' }, { author: 'model', eventId: 'given' }] });
    expect(requests).toHaveLength(3);
    const bodies = requests.map((request) => JSON.parse(String(request.init.body)) as { events: { eventId: string }[] });
    expect(new Set(bodies.map((body) => JSON.stringify(body))).size).toBe(1);
    expect(bodies[0]!.events[0]!.eventId).toMatch(/^[0-9a-f-]{36}$/);
    expect(bodies[0]!.events[1]!.eventId).toBe('given');
    expect(sleeps).toEqual([50, 3_000]); // jittered backoff after the network error, Retry-After after the 503
    expect(new Set(requests.map((request) => (request.init.headers as Record<string, string>)['x-request-id'])).size).toBe(1);
  });

  it('retries 429 and 503 at most maxRetries times, then throws the last answer as AgentSessionError', async () => {
    const { fetch, requests } = scriptedFetch([unavailable(), json(429, { error: { code: 'RequestLimitExceeded', message: 'slow', requestId: 'r2' } }), unavailable()]);
    const sleeps: number[] = [];
    const error = await clientWith(fetch, sleeps, 2).describeSession(where).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentSessionError);
    expect(error).toMatchObject({ code: 'ServiceUnavailable', status: 503, requestId: 'r1', message: 'busy' });
    expect(requests).toHaveLength(3);
    expect(sleeps).toEqual([3_000, 100]);
  });

  it('does not resend a POST that creates something new after a network error, but does after a 503', async () => {
    const lost = scriptedFetch([new TypeError('fetch failed')]);
    await expect(clientWith(lost.fetch, []).createSessionSpace({ name: 'x' })).rejects.toMatchObject({ code: 'ClientError.Network', status: 0 });
    expect(lost.requests).toHaveLength(1);
    const busy = scriptedFetch([unavailable(), json(201, { spaceId: 'space-1' })]);
    await expect(clientWith(busy.fetch, []).createSessionSpace({ name: 'x' })).resolves.toMatchObject({ spaceId: 'space-1' });
    expect(busy.requests).toHaveLength(2);
  });

  it('resends a createSessionSpace with onNameExists: reuse after a network error: a second one finds the first one\'s space', async () => {
    const { fetch, requests } = scriptedFetch([new TypeError('fetch failed'), json(200, { spaceId: 'space-1' })]);
    await expect(clientWith(fetch, []).createSessionSpace({ name: 'x', onNameExists: 'reuse' })).resolves.toMatchObject({ spaceId: 'space-1' });
    expect(requests).toHaveLength(2);
  });

  it('takes an answer cut off mid-body as a lost answer: resends what may be repeated, reports the rest as ClientError.Network with the status', async () => {
    const cutOff = (status: number) =>
      new Response(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('{"events": [{"se'));
            controller.error(new TypeError('terminated'));
          },
        }),
        { status, headers: { 'content-type': 'application/json' } },
      );
    const append = scriptedFetch([cutOff(201), json(200, appended)]);
    const sleeps: number[] = [];
    await expect(clientWith(append.fetch, sleeps).appendEvents(where, { author: 'user' })).resolves.toMatchObject(appended);
    expect(append.requests).toHaveLength(2);
    expect(append.requests[0]!.init.body).toBe(append.requests[1]!.init.body);
    expect(sleeps).toEqual([50]);
    const create = scriptedFetch([cutOff(201)]);
    const error = await clientWith(create.fetch, []).createSessionSpace({ name: 'x' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentSessionError);
    expect(error).toMatchObject({ code: 'ClientError.Network', status: 201, message: expect.stringContaining('was cut off: terminated') });
    expect(create.requests).toHaveLength(1);
  });

  it('does not retry other errors, and renders the envelope', async () => {
    const { fetch, requests } = scriptedFetch([json(404, { error: { code: 'ResourceNotFound.Session', message: 'no', requestId: 'r3', details: { sessionId: 's1' } } })]);
    await expect(clientWith(fetch, []).describeSession(where)).rejects.toMatchObject({ code: 'ResourceNotFound.Session', status: 404, requestId: 'r3', details: { sessionId: 's1' } });
    expect(requests).toHaveLength(1);
  });

  it('builds the URL from the path template and the query, and sends If-Match and the credential', async () => {
    const { fetch, requests } = scriptedFetch([json(200, { sessions: [] }), json(200, {}, { etag: '"4"' })]);
    const client = clientWith(fetch, []);
    await client.listSessions({ spaceId: 'space 1', userId: 'u/1', metadata: ['a=1', 'b=2'], pageSize: 5 });
    expect(requests[0]!.url).toBe('http://service.test/v1/spaces/space%201/users/u%2F1/sessions?metadata=a%3D1&metadata=b%3D2&pageSize=5');
    const modified = await client.modifySession(where, { title: 't' }, { ifMatch: '"3"' });
    expect(modified.etag).toBe('"4"');
    expect(requests[1]!.init.headers).toMatchObject({ 'if-match': '"3"', authorization: 'Bearer key.secret', 'content-type': 'application/json' });
  });
});

describe('the operation table', () => {
  it('has every operation of openapi/openapi.json with its method and path, and no other', () => {
    const document = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8')) as {
      paths: Record<string, Record<string, { operationId?: string }>>;
    };
    const fromDocument = Object.entries(document.paths).flatMap(([path, item]) =>
      Object.entries(item).flatMap(([method, operation]) => (operation.operationId ? [[operation.operationId, { method: method.toUpperCase(), path }]] : [])),
    );
    expect(Object.fromEntries(fromDocument)).toEqual(OPERATIONS);
    // and the client has a method of the same name for each
    const client = new AgentSessionClient({ baseUrl: 'http://x', credential: 'c' }) as unknown as Record<string, unknown>;
    expect(Object.keys(OPERATIONS).filter((id) => typeof client[id] !== 'function')).toEqual([]);
  });
});
