// An event list page carries at most MAX_LIST_PAGE_BYTES of events (the first event always comes):
// with events of up to MAX_EVENT_BYTES each, a page of 200 would otherwise be 50 MB built in the
// instance's memory by one legitimate request. Here the budget is 64 KiB and the events carry about
// 15 KB each, so a page holds four; one event of 100 KB comes alone.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listEventJsons, listEvents } from '../../src/modules/events/events.repository.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { followPages } from '../support/list-answers.js';
import { listenOnLoopback, sdkClient, sdkError } from '../support/tencent-client.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const BUDGET = 64 * 1024;
/** In the order appended: e3 is the agent's, `huge` is 100 KB, the others 15 KB each. */
const EVENT_IDS = ['e1', 'e2', 'e3', 'e4', 'e5', 'huge', 'e7', 'e8', 'e9', 'e10', 'e11', 'e12'];

let t: TestApp;
let spaceId: string;
let eventsUrl: string;
beforeAll(async () => {
  t = await createTestApp({ credentialMasterKey: Buffer.alloc(32, 9), limits: { listPageBytes: BUDGET, rateLimitMax: 0 } });
  const space = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'large events' } });
  spaceId = space.json().spaceId;
  const created = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/u1/sessions`, payload: { sessionId: 's1' } });
  expect(created.statusCode, created.body).toBe(201);
  eventsUrl = `/v1/spaces/${spaceId}/users/u1/sessions/s1/events`;
  for (const eventId of EVENT_IDS) {
    const text = (eventId === 'huge' ? 'h' : eventId.at(-1)!).repeat(eventId === 'huge' ? 100_000 : 15_000);
    const appended = await t.request({ method: 'POST', url: eventsUrl, payload: { eventId, author: eventId === 'e3' ? 'agent' : 'user', content: { parts: [{ text }] } } });
    expect(appended.statusCode, appended.body).toBe(201);
  }
});
afterAll(async () => t?.close());

interface Listed {
  eventId: string;
  content: { parts: { text: string }[] };
}

const pages = (query: string, url = eventsUrl) => followPages<Listed>(t, `${url}?${query}`, 'events');

const ids = (page: Listed[]) => page.map((event) => event.eventId);

describe('an event list page within MAX_LIST_PAGE_BYTES', () => {
  it('ends a page before the event that would pass the budget, with a nextPageToken; the pages list every event once, in order, whole', async () => {
    const ascending = await pages('pageSize=200');
    expect(ascending.map(ids)).toEqual([['e1', 'e2', 'e3', 'e4'], ['e5'], ['huge'], ['e7', 'e8', 'e9', 'e10'], ['e11', 'e12']]);
    for (const page of ascending) {
      for (const event of page) expect(event.content.parts[0]!.text).toHaveLength(event.eventId === 'huge' ? 100_000 : 15_000);
      if (page.length > 1) expect(JSON.stringify(page).length).toBeLessThanOrEqual(BUDGET);
    }
    const descending = await pages('pageSize=200&order=desc');
    expect(descending.map(ids)).toEqual([['e12', 'e11', 'e10', 'e9'], ['e8', 'e7'], ['huge'], ['e5', 'e4', 'e3', 'e2'], ['e1']]);
    // The filtered walk (two steps) keeps the budget too: without the agent's e3, e5 fits in the first page.
    expect((await pages('pageSize=200&author=user')).map(ids)).toEqual([['e1', 'e2', 'e4', 'e5'], ['huge'], ['e7', 'e8', 'e9', 'e10'], ['e11', 'e12']]);
    // A pageSize the budget allows is kept; the total counts every event.
    const small = await t.request({ method: 'GET', url: `${eventsUrl}?pageSize=2&includeTotal=true` });
    expect(small.json()).toMatchObject({ events: [{ eventId: 'e1' }, { eventId: 'e2' }], nextPageToken: expect.any(String), totalCount: 12 });
    expect((await pages('pageSize=3')).map(ids)).toEqual([['e1', 'e2', 'e3'], ['e4', 'e5'], ['huge'], ['e7', 'e8', 'e9'], ['e10', 'e11', 'e12']]);
  });

  it('ends the page after a first event over the budget as stored (incompressible), and goes on from it', async () => {
    // Text that pglz cannot shrink: the event is stored at its full size, more than the budget, so
    // the stored sizes alone rule out every event after it.
    const noise = randomBytes(75_000).toString('base64');
    const session = `/v1/spaces/${spaceId}/users/u1/sessions`;
    expect((await t.request({ method: 'POST', url: session, payload: { sessionId: 'noisy' } })).statusCode).toBe(201);
    for (const [eventId, text] of [['small-1', 'x'.repeat(1_000)], ['noise', noise], ['small-2', 'y'.repeat(1_000)], ['small-3', 'z'.repeat(1_000)]] as const) {
      const appended = await t.request({ method: 'POST', url: `${session}/noisy/events`, payload: { eventId, author: 'user', content: { parts: [{ text }] } } });
      expect(appended.statusCode, appended.body).toBe(201);
    }
    const stored = await sql<{ bytes: number }>`SELECT pg_column_size(content) AS bytes FROM events WHERE account_id = ${t.account.accountId} AND session_id = 'noisy' AND event_id = 'noise'`.execute(t.db);
    expect(stored.rows[0]!.bytes).toBeGreaterThan(BUDGET);
    const url = `${session}/noisy/events`;
    const follow = async (query: string) => (await pages(query, url)).map(ids);
    // The named statement's page (asc, desc) and the two-step walk's (a filter).
    expect(await follow('pageSize=200')).toEqual([['small-1'], ['noise'], ['small-2', 'small-3']]);
    expect(await follow('pageSize=200&order=desc')).toEqual([['small-3', 'small-2'], ['noise'], ['small-1']]);
    expect(await follow('pageSize=200&author=user')).toEqual([['small-1'], ['noise'], ['small-2', 'small-3']]);
    const noiseEvent = (await t.request({ method: 'GET', url: `${url}?afterSeq=1&pageSize=1` })).json().events[0] as Listed;
    expect(noiseEvent.content.parts[0]!.text).toBe(noise);
  });

  it('does not send the events past the budget from the database', async () => {
    const key = { accountId: t.account.accountId, spaceId, userId: 'u1', sessionId: 's1' };
    const json = await listEventJsons(t.db, key, {}, { order: 'asc', limit: 201 }, BUDGET);
    expect(json.rows.map((row) => Number(row.seq))).toEqual([1, 2, 3, 4]);
    expect(json.cutByBudget).toBe(true);
    const offset = await listEvents(t.db, key, {}, { order: 'asc', limit: 3, offset: 4 }, BUDGET);
    expect(offset.rows.map((row) => row.event_id)).toEqual(['e5']);
    expect(offset.cutByBudget).toBe(true);
    const alone = await listEvents(t.db, key, { author: 'user' }, { order: 'desc', cursorSeq: 7, limit: 201 }, BUDGET);
    expect(alone.rows.map((row) => row.event_id)).toEqual(['huge']);
    expect(alone.cutByBudget).toBe(true);
    // The last page: nothing after it, so nothing passes.
    const last = await listEvents(t.db, key, {}, { order: 'asc', cursorSeq: 10, limit: 201 }, BUDGET);
    expect(last.rows.map((row) => row.event_id)).toEqual(['e11', 'e12']);
    expect(last.cutByBudget).toBe(false);
    // A page that ends at its limit, the next event fitting: the limit ended it, not the budget.
    const limited = await listEvents(t.db, key, { author: 'user' }, { order: 'asc', limit: 2 }, BUDGET);
    expect(limited.rows.map((row) => row.event_id)).toEqual(['e1', 'e2']);
    expect(limited.cutByBudget).toBe(false);
  });

  it('API 3.0: DescribeEvents refuses a Limit whose events pass the budget, naming the Limit that fits; smaller Limits page through all', async () => {
    const sdk = sdkClient(await listenOnLoopback(t.app), t.account.rootCredential);
    const before = await tableFingerprints(t.db);
    const refused = await sdkError(sdk.request('DescribeEvents', { SpaceId: spaceId, UserId: 'u1', SessionId: 's1', Limit: 200 }));
    expect(refused.code).toBe('InvalidParameterValue');
    expect(refused.message).toMatch(/^Limit: the 200 events from Offset 0 carry more than 65536 bytes .*the first 4 fit, ask a Limit of at most that$/);
    const fromHuge = await sdkError(sdk.request('DescribeEvents', { SpaceId: spaceId, UserId: 'u1', SessionId: 's1', Limit: 2, Offset: 5 }));
    expect(fromHuge.message).toMatch(/^Limit: the 2 events from Offset 5 .*the first 1 fit/);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);

    const four = (await sdk.request('DescribeEvents', { SpaceId: spaceId, UserId: 'u1', SessionId: 's1', Limit: 4 })) as { TotalCount: number; Events: { EventId: string }[] };
    expect(four.TotalCount).toBe(12);
    expect(four.Events.map((event) => event.EventId)).toEqual(['e1', 'e2', 'e3', 'e4']);
    const seen: string[] = [];
    for (let offset = 0; offset < EVENT_IDS.length; offset++) {
      const one = (await sdk.request('DescribeEvents', { SpaceId: spaceId, UserId: 'u1', SessionId: 's1', Limit: 1, Offset: offset })) as { Events: { EventId: string }[] };
      seen.push(...one.Events.map((event) => event.EventId));
    }
    expect(seen).toEqual(EVENT_IDS);
  });
});
