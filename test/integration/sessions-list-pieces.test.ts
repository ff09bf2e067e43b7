// The REST session lists answer each session as PostgreSQL writes it (the describe read's JSON text,
// merged state included) and never parse it; a page larger than PIECEWISE_ANSWER_CHARS is written
// piece by piece, in chunked transfer coding, rather than joined into one string and written in one
// go (each of which held the event loop, for every tenant, for tens of milliseconds at 4 MB). Over
// a real socket, because the transfer coding is what is checked.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { fetchPiecewiseAnswer, fetchWholeAnswer } from '../support/list-answers.js';
import { listenOnLoopback } from '../support/tencent-client.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let base: string;
let headers: Record<string, string>;
let largeSpace: string;
let smallSpace: string;
/** Each session's own state: 100 K characters, some of them outside ASCII (2 to 4 bytes in UTF-8). */
const ownState = (n: number) => ({ notes: `${'n'.repeat(100_000)}${n}`, accents: 'é🙂中'.repeat(100) });
const LARGE_SESSIONS = 6;

beforeAll(async () => {
  t = await createTestApp({ limits: { rateLimitMax: 0 } });
  headers = { authorization: `Bearer ${t.account.rootCredential.token}` };
  const create = async (name: string) => {
    const res = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name } });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().spaceId as string;
  };
  largeSpace = await create('large');
  smallSpace = await create('small');
  for (let n = 0; n < LARGE_SESSIONS; n++) {
    const created = await t.request({ method: 'POST', url: `/v1/spaces/${largeSpace}/users/u${n % 2}/sessions`, payload: { sessionId: `s${n}`, state: ownState(n), metadata: { n: String(n) } } });
    expect(created.statusCode, created.body).toBe(201);
  }
  // The space's key, which every session's merged state shows, and u0's, which only u0's sessions show.
  const shared = await t.request({
    method: 'POST',
    url: `/v1/spaces/${largeSpace}/users/u0/sessions/s0/events`,
    payload: { author: 'agent', actions: { stateDelta: { 'app:shared': 'a'.repeat(1_000), 'user:profile': 'p' } } },
  });
  expect(shared.statusCode, shared.body).toBe(201);
  for (const sessionId of ['x', 'y']) {
    const created = await t.request({ method: 'POST', url: `/v1/spaces/${smallSpace}/users/u/sessions`, payload: { sessionId, state: { k: 1 } } });
    expect(created.statusCode, created.body).toBe(201);
  }
  base = `http://${await listenOnLoopback(t.app)}`;
});
afterAll(async () => t?.close());

interface Listed {
  userId: string;
  sessionId: string;
}

describe('the REST session lists', () => {
  it('send a page larger than PIECEWISE_ANSWER_CHARS in chunked transfer coding, every session as describe answers it', async () => {
    for (const path of [`/v1/spaces/${largeSpace}/sessions?pageSize=100&includeTotal=true`, `/v1/spaces/${largeSpace}/users/u0/sessions?pageSize=100`]) {
      const body = await fetchPiecewiseAnswer<{ sessions: Listed[]; totalCount?: number; nextPageToken?: string }>(`${base}${path}`, headers);
      expect(body.nextPageToken).toBeUndefined();
      const expected = path.includes('/users/') ? LARGE_SESSIONS / 2 : LARGE_SESSIONS;
      expect(body.sessions).toHaveLength(expected);
      if (path.includes('includeTotal')) expect(body.totalCount).toBe(LARGE_SESSIONS);
      for (const listed of body.sessions) {
        const described = await t.request({ method: 'GET', url: `/v1/spaces/${largeSpace}/users/${listed.userId}/sessions/${listed.sessionId}` });
        expect(listed).toEqual(described.json());
        const n = Number(listed.sessionId.slice(1));
        const userKeys = listed.userId === 'u0' ? { 'user:profile': 'p' } : {};
        expect(listed).toMatchObject({ state: { ...ownState(n), 'app:shared': 'a'.repeat(1_000), ...userKeys }, metadata: { n: String(n) } });
      }
    }
  });

  it('send a small page whole, with its Content-Length', async () => {
    const body = await fetchWholeAnswer<{ sessions: Listed[]; nextPageToken?: string }>(`${base}/v1/spaces/${smallSpace}/sessions?pageSize=1`, headers);
    expect(body.sessions.map((session) => session.sessionId)).toEqual(['y']);
    expect(body.nextPageToken).toEqual(expect.any(String));
    const next = await fetch(`${base}/v1/spaces/${smallSpace}/sessions?pageSize=1&pageToken=${encodeURIComponent(body.nextPageToken!)}`, { headers });
    expect((await next.json()) as { sessions: Listed[] }).toEqual({ sessions: [expect.objectContaining({ sessionId: 'x', state: { k: 1 } })] });
  });
});
