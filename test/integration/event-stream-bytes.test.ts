// An event stream reads its session's events as the event lists page them: at most
// MAX_LIST_PAGE_BYTES a read (the first event always comes), each event written by PostgreSQL and
// framed unparsed. Here the budget is 64 KiB and each event carries 15 KB, so a read takes four:
// a stream must still get every event once, in order, whole, stored and live.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { openSse } from '../support/sse-reader.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const BUDGET = 64 * 1024;

let t: TestApp;
let base: string;
let session: string;
beforeAll(async () => {
  t = await createTestApp({ eventStreamHeartbeatMs: 600_000, eventStreamPollMs: 100, limits: { listPageBytes: BUDGET, rateLimitMax: 0 } });
  base = `${await t.app.listen({ port: 0, host: '127.0.0.1' })}/v1`;
  const space = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'large events' } });
  session = `/spaces/${space.json().spaceId}/users/u1/sessions/s1`;
  expect((await t.request({ method: 'POST', url: `/v1/spaces/${space.json().spaceId}/users/u1/sessions`, payload: { sessionId: 's1' } })).statusCode).toBe(201);
});
afterAll(async () => t?.close());

/** Appends one request of these events, each a 15,000-character text of its own letter. */
async function append(eventIds: string[]): Promise<void> {
  const events = eventIds.map((eventId) => ({ eventId, author: 'agent', content: { role: 'model', parts: [{ text: eventId.at(-1)!.repeat(15_000) }] } }));
  const res = await t.request({ method: 'POST', url: `/v1${session}/events`, payload: { events } });
  expect(res.statusCode, res.body).toBe(201);
}

async function streamReads(): Promise<{ catchUp: number; shared: number }> {
  const samples = parsePrometheusText((await t.request({ method: 'GET', url: '/metrics' })).body);
  return { catchUp: sampleValue(samples, 'event_stream_reads_total', { kind: 'catch_up' }), shared: sampleValue(samples, 'event_stream_reads_total', { kind: 'shared' }) };
}

describe('an event stream within MAX_LIST_PAGE_BYTES a read', () => {
  it('sends every stored event, then every live one, once, in order and whole, though each read takes only four', async () => {
    const stored = Array.from({ length: 12 }, (_, i) => `stored-${String.fromCharCode(97 + i)}`);
    await append(stored.slice(0, 6));
    await append(stored.slice(6));
    const listed = await t.request({ method: 'GET', url: `/v1${session}/events?pageSize=200` });
    expect(listed.json().events).toHaveLength(4); // the list's page, for comparison: the same budget

    const before = await streamReads();
    const stream = await openSse(`${base}${session}/events/stream`, t.account.rootCredential.token);
    expect(stream.status).toBe(200);
    const caughtUp = await stream.events(12);
    expect(caughtUp.map((event) => event.seq)).toEqual(Array.from({ length: 12 }, (_, i) => i + 1));
    expect(caughtUp.map((event) => event.body.eventId)).toEqual(stored);
    // Each frame is the event as the list sends it.
    expect(caughtUp.slice(0, 4).map((event) => event.body)).toEqual(listed.json().events);
    const afterCatchUp = await streamReads();
    expect(afterCatchUp.catchUp - before.catchUp).toBeGreaterThanOrEqual(3);

    // Six in one append: the shared read that brings them is cut by the budget and reads on.
    const live = Array.from({ length: 6 }, (_, i) => `live-${String.fromCharCode(110 + i)}`);
    await append(live);
    const delivered = await stream.events(6);
    expect(delivered.map((event) => event.seq)).toEqual([13, 14, 15, 16, 17, 18]);
    expect(delivered.map((event) => event.body.eventId)).toEqual(live);
    for (const event of [...caughtUp, ...delivered]) {
      const text = (event.body.content as { parts: { text: string }[] }).parts[0]!.text;
      expect(text).toBe(String(event.body.eventId).at(-1)!.repeat(15_000));
    }
    expect((await streamReads()).shared - afterCatchUp.shared).toBeGreaterThanOrEqual(2);
    stream.close();
  });
});
