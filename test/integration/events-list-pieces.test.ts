// The REST event list answers each event as PostgreSQL writes it (the context read's JSON text) and
// never parses it; a page larger than PIECEWISE_ANSWER_CHARS is written piece by piece, in chunked
// transfer coding (a page may be 200 events of 256 KiB). Each listed event must be exactly what
// describing that event answers, whichever optional fields it has. Over a real socket, because the
// transfer coding is what is checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchPiecewiseAnswer, fetchWholeAnswer } from '../support/list-answers.js';
import { listenOnLoopback } from '../support/tencent-client.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let base: string;
let headers: Record<string, string>;
let session: string;

/** Events with every optional field present or absent, and three of ~100 K characters (some of 2 to 4 UTF-8 bytes). */
const EVENTS = [
  { eventId: 'e1', author: 'user', content: { role: 'user', parts: [{ text: `${'q'.repeat(100_000)} é🙂中` }] } },
  {
    eventId: 'e2',
    invocationId: 'inv-1',
    author: 'agent',
    content: { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'lookup', args: { q: 'x' } } }] },
    actions: { stateDelta: { mood: 'ok', 'user:lang': 'fr' } },
    metadata: { trace: 't-1', nested: { a: [1, 2.5, null, true] } },
    extensions: { 'example.com/x': { y: 'z' } },
    timestamp: '2026-01-02T03:04:05.678Z',
  },
  { eventId: 'e3', author: 'agent', errorCode: 'TOOL_FAILED', errorMessage: 'quote " backslash \\ newline \n tab \t' },
  { eventId: 'e4', author: 'tool', content: { role: 'user', parts: [{ functionResponse: { id: 'c1', name: 'lookup', response: { r: 'a'.repeat(100_000) } } }] } },
  { eventId: 'e5', author: 'agent', content: { role: 'model', parts: [{ text: 'b'.repeat(100_000) }] } },
];

beforeAll(async () => {
  t = await createTestApp({ limits: { rateLimitMax: 0 } });
  headers = { authorization: `Bearer ${t.account.rootCredential.token}` };
  session = `/v1/spaces/${t.account.defaultSpaceId}/users/u1/sessions/s1`;
  const created = await t.request({ method: 'POST', url: `/v1/spaces/${t.account.defaultSpaceId}/users/u1/sessions`, payload: { sessionId: 's1' } });
  expect(created.statusCode, created.body).toBe(201);
  const appended = await t.request({ method: 'POST', url: `${session}/events`, payload: { events: EVENTS } });
  expect(appended.statusCode, appended.body).toBe(201);
  base = `http://${await listenOnLoopback(t.app)}`;
});
afterAll(async () => t?.close());

interface Listed {
  seq: number;
  eventId: string;
}

/** Each listed event against describing it by id: the same JSON value. */
async function expectAsDescribed(events: Listed[]): Promise<void> {
  for (const event of events) {
    const described = await t.request({ method: 'GET', url: `${session}/events/${event.eventId}` });
    expect(described.statusCode, described.body).toBe(200);
    expect(event).toEqual(described.json());
  }
}

describe('the REST event list', () => {
  it('sends a page larger than PIECEWISE_ANSWER_CHARS in chunked transfer coding, every event as describing it answers', async () => {
    for (const order of ['asc', 'desc']) {
      const body = await fetchPiecewiseAnswer<{ events: Listed[]; totalCount?: number; nextPageToken?: string }>(`${base}${session}/events?pageSize=100&order=${order}&includeTotal=true`, headers);
      const ids = body.events.map((event) => event.eventId);
      expect(ids).toEqual(order === 'asc' ? ['e1', 'e2', 'e3', 'e4', 'e5'] : ['e5', 'e4', 'e3', 'e2', 'e1']);
      expect(body.totalCount).toBe(EVENTS.length);
      expect(body.nextPageToken).toBeUndefined();
      await expectAsDescribed(body.events);
    }
    // The optional fields as given, absent ones left out.
    const listed = (await (await fetch(`${base}${session}/events?pageSize=100`, { headers })).json()) as { events: Record<string, unknown>[] };
    const { eventId: _id, timestamp, ...withoutId } = EVENTS[1]!;
    expect(listed.events[1]).toEqual({ ...withoutId, seq: 2, eventId: 'e2', timestamp, createTime: expect.any(String) });
    expect(Object.keys(listed.events[2]!).sort()).toEqual(['author', 'createTime', 'errorCode', 'errorMessage', 'eventId', 'seq', 'timestamp']);
  });

  it('sends a small page whole, with its Content-Length, through filters, offsets of a cursor and the page token', async () => {
    const first = await fetchWholeAnswer<{ events: Listed[]; nextPageToken?: string }>(`${base}${session}/events?pageSize=1&author=agent`, headers);
    expect(first.events.map((event) => event.eventId)).toEqual(['e2']);
    await expectAsDescribed(first.events);
    const next = await fetch(`${base}${session}/events?pageSize=1&author=agent&pageToken=${encodeURIComponent(first.nextPageToken!)}`, { headers });
    const second = (await next.json()) as { events: Listed[]; nextPageToken?: string };
    expect(second.events.map((event) => event.eventId)).toEqual(['e3']);
    await expectAsDescribed(second.events);
    const empty = (await (await fetch(`${base}${session}/events?afterSeq=5`, { headers })).json()) as { events: Listed[] };
    expect(empty).toEqual({ events: [] });
  });
});
