import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const USER = 'list-user';
const AUTHORS = ['user', 'agent', 'tool'] as const;
const T0 = Date.parse('2026-01-01T00:00:00.000Z');
/** Event n (1-based) has author AUTHORS[(n-1) % 3] and timestamp T0 + n minutes. */
const timeOf = (n: number) => new Date(T0 + n * 60_000).toISOString();
const COUNT = 30;

interface EventBody {
  seq: number;
  eventId: string;
  author: string;
  timestamp: string;
}

async function newSession(): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
  return sessionId;
}

const eventsUrl = (sessionId: string, spaceId = t.account.defaultSpaceId) => `/v1/spaces/${spaceId}/users/${USER}/sessions/${sessionId}/events`;

async function appendNumbered(sessionId: string, from: number, to: number): Promise<void> {
  const events = [];
  for (let n = from; n <= to; n++) events.push({ eventId: `e-${n}`, author: AUTHORS[(n - 1) % 3], timestamp: timeOf(n) });
  const res = await t.request({ method: 'POST', url: eventsUrl(sessionId), payload: { events } });
  expect(res.statusCode).toBe(201);
}

async function list(sessionId: string, query: string, token?: string) {
  return t.request({ method: 'GET', url: `${eventsUrl(sessionId)}?${query}`, ...(token ? { token } : {}) });
}

async function seqs(sessionId: string, query: string): Promise<number[]> {
  const res = await list(sessionId, query);
  expect(res.statusCode).toBe(200);
  return res.json().events.map((e: EventBody) => e.seq);
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

let sessionId: string;
beforeAll(async () => {
  sessionId = await newSession();
  await appendNumbered(sessionId, 1, COUNT);
});

describe('GET …/events', () => {
  it('lists every event in seq order by default, and newest first with order=desc', async () => {
    const res = await list(sessionId, '');
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.events.map((e: EventBody) => e.seq)).toEqual(range(1, COUNT));
    expect(body.events[4]).toEqual({ seq: 5, eventId: 'e-5', author: 'agent', timestamp: timeOf(5), createTime: expect.any(String) });
    expect(body).not.toHaveProperty('nextPageToken');
    expect(body).not.toHaveProperty('totalCount');
    expect(await seqs(sessionId, 'order=desc')).toEqual(range(1, COUNT).reverse());
  });

  it('filters by seq range (exclusive bounds)', async () => {
    expect(await seqs(sessionId, 'afterSeq=10&beforeSeq=15')).toEqual([11, 12, 13, 14]);
    expect(await seqs(sessionId, 'afterSeq=27')).toEqual([28, 29, 30]);
    expect(await seqs(sessionId, 'beforeSeq=3&order=desc')).toEqual([2, 1]);
    expect(await seqs(sessionId, 'afterSeq=30')).toEqual([]);
  });

  it('filters by time range on the event timestamp (exclusive bounds)', async () => {
    expect(await seqs(sessionId, `after=${timeOf(5)}&before=${timeOf(9)}`)).toEqual([6, 7, 8]);
    // The same instant written with an offset.
    expect(await seqs(sessionId, `after=${encodeURIComponent('2026-01-01T01:27:00.000+01:00')}`)).toEqual([28, 29, 30]);
    expect(await seqs(sessionId, `before=${timeOf(3)}&order=desc`)).toEqual([2, 1]);
  });

  it('filters by author, alone and combined with the other filters', async () => {
    expect(await seqs(sessionId, 'author=tool')).toEqual([3, 6, 9, 12, 15, 18, 21, 24, 27, 30]);
    expect(await seqs(sessionId, `author=user&afterSeq=3&before=${timeOf(13)}&order=desc`)).toEqual([10, 7, 4]);
    expect(await seqs(sessionId, 'author=nobody')).toEqual([]);
  });

  it('pages with nextPageToken in both orders, each event exactly once, and counts on request', async () => {
    for (const order of ['asc', 'desc'] as const) {
      const seen: number[] = [];
      let token: string | undefined;
      let pages = 0;
      do {
        const res = await list(sessionId, `order=${order}&author=agent&pageSize=3&includeTotal=true${token ? `&pageToken=${token}` : ''}`);
        expect(res.statusCode).toBe(200);
        const body = res.json();
        expect(body.totalCount).toBe(10);
        seen.push(...body.events.map((e: EventBody) => e.seq));
        token = body.nextPageToken;
        pages++;
      } while (token);
      const expected = [2, 5, 8, 11, 14, 17, 20, 23, 26, 29];
      expect(seen).toEqual(order === 'asc' ? expected : expected.reverse());
      expect(pages).toBe(4);
    }
  });

  it('refuses a page token used with other filters, and a forged one, with 400 InvalidParameter.PageToken', async () => {
    const first = (await list(sessionId, 'pageSize=5&author=user')).json();
    expect(first.nextPageToken).toEqual(expect.any(String));
    const otherFilters = await list(sessionId, `pageSize=5&author=agent&pageToken=${first.nextPageToken}`);
    expect(otherFilters.statusCode).toBe(400);
    expect(otherFilters.json().error.code).toBe('InvalidParameter.PageToken');
    const otherOrder = await list(sessionId, `pageSize=5&author=user&order=desc&pageToken=${first.nextPageToken}`);
    expect(otherOrder.json().error.code).toBe('InvalidParameter.PageToken');
    const forged = await list(sessionId, 'pageToken=bm90LWEtdG9rZW4');
    expect(forged.statusCode).toBe(400);
    expect(forged.json().error.code).toBe('InvalidParameter.PageToken');
    // The page size may change between pages.
    const next = await list(sessionId, `pageSize=2&author=user&pageToken=${first.nextPageToken}`);
    expect(next.json().events.map((e: EventBody) => e.seq)).toEqual([16, 19]);
  });

  it('refuses bad query parameters with 400 naming them', async () => {
    for (const [query, field] of [
      ['pageSize=201', 'pageSize'],
      ['pageSize=0', 'pageSize'],
      ['order=sideways', 'order'],
      ['afterSeq=-1', 'afterSeq'],
      ['afterSeq=9007199254740992', 'afterSeq'],
      ['after=yesterday', 'after'],
      ['after=2026-12-31T23:59:60Z', 'after'],
      ['unknownFilter=1', 'querystring'],
    ]) {
      const res = await list(sessionId, query!);
      expect(res.statusCode, query).toBe(400);
      expect(res.json().error.code).toBe('InvalidParameter');
      // One issue per field and rule: a value that is no timestamp is not also "out of range".
      expect(res.json().error.details.issues, query).toEqual([{ field, message: expect.any(String) }]);
    }
  });

  it('walks every event exactly once while other clients append', { timeout: 60_000 }, async () => {
    const busy = await newSession();
    await appendNumbered(busy, 1, 40);
    for (const order of ['asc', 'desc'] as const) {
      const atStart = await t.db.selectFrom('sessions').select('event_count').where('session_id', '=', busy).executeTakeFirstOrThrow();
      const writers = (async () => {
        for (let i = 0; i < 10; i++) {
          const res = await t.request({ method: 'POST', url: eventsUrl(busy), payload: { events: [{ author: 'late' }, { author: 'late' }] } });
          expect(res.statusCode).toBe(201);
        }
      })();
      const seen: number[] = [];
      let token: string | undefined;
      do {
        const res = await list(busy, `order=${order}&pageSize=7${token ? `&pageToken=${token}` : ''}`);
        expect(res.statusCode).toBe(200);
        seen.push(...res.json().events.map((e: EventBody) => e.seq));
        token = res.json().nextPageToken;
      } while (token);
      await writers;
      // seq is gap-free and committed in order: an ascending walk sees 1..k, a descending one k..1,
      // for some k no smaller than what existed when the walk began. Nothing twice, nothing skipped.
      const expected = range(1, seen.length);
      expect(seen).toEqual(order === 'asc' ? expected : expected.reverse());
      expect(seen.length).toBeGreaterThanOrEqual(atStart.event_count);
    }
  });
});

describe('GET …/events/{eventId}', () => {
  it('answers one event', async () => {
    const res = await t.request({ method: 'GET', url: `${eventsUrl(sessionId)}/e-7` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ seq: 7, eventId: 'e-7', author: 'user', timestamp: timeOf(7), createTime: expect.any(String) });
  });

  it('answers 404 ResourceNotFound.Event for an unknown event', async () => {
    const res = await t.request({ method: 'GET', url: `${eventsUrl(sessionId)}/e-999` });
    expect(res.statusCode).toBe(404);
    expect(res.json().error.code).toBe('ResourceNotFound.Event');
  });
});

describe('events of sessions that cannot be seen', () => {
  it('answers 404 ResourceNotFound.Session for an unknown or expired session', async () => {
    for (const url of [eventsUrl('no-such-session'), `${eventsUrl('no-such-session')}/e-1`]) {
      const res = await t.request({ method: 'GET', url });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.Session');
    }
    const expiring = await newSession();
    await appendNumbered(expiring, 1, 2);
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1) }).where('session_id', '=', expiring).execute();
    for (const url of [eventsUrl(expiring), `${eventsUrl(expiring)}/e-1`]) {
      const res = await t.request({ method: 'GET', url });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.Session');
    }
  });

  it('answers 404 ResourceNotFound.SessionSpace for an unknown space', async () => {
    const unknownSpace = `space-${randomUUID()}`;
    for (const url of [eventsUrl(sessionId, unknownSpace), `${eventsUrl(sessionId, unknownSpace)}/e-1`]) {
      const res = await t.request({ method: 'GET', url });
      expect(res.statusCode).toBe(404);
      expect(res.json().error.code).toBe('ResourceNotFound.SessionSpace');
    }
  });

  it('answers 404 to another account, whichever space it names', async () => {
    const other = await t.createAccount();
    const token = other.rootCredential.token;
    for (const [url, code] of [
      [eventsUrl(sessionId), 'ResourceNotFound.SessionSpace'],
      [`${eventsUrl(sessionId)}/e-1`, 'ResourceNotFound.SessionSpace'],
      [eventsUrl(sessionId, other.defaultSpaceId), 'ResourceNotFound.Session'],
      [`${eventsUrl(sessionId, other.defaultSpaceId)}/e-1`, 'ResourceNotFound.Session'],
    ] as const) {
      const res = await t.request({ method: 'GET', url, token });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().error.code).toBe(code);
    }
  });
});
