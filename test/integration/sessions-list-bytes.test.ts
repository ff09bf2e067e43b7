// A session list page carries at most MAX_LIST_PAGE_BYTES of states, metadata and memo (the first
// session always comes): with states of up to MAX_STATE_BYTES each, a page of 100 sessions would
// otherwise be hundreds of megabytes built in the instance's memory by one legitimate request.
// Here the budget is 64 KiB and each session carries about 28 KB (its own 8 KB, its user's and its
// space's 10 KB each), so a page holds two; one session of 100 KB comes alone.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stateBytes } from '../../src/lib/json-measure.js';
import { type SessionPageRequest, listSessionRows } from '../../src/modules/sessions/sessions.repository.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { followPages } from '../support/list-answers.js';
import { listenOnLoopback, sdkClient, sdkError } from '../support/tencent-client.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const BUDGET = 64 * 1024;

let t: TestApp;
let spaceId: string;
/** Every session's id, newest update first (the lists' default order). */
let newestFirst: string[];
beforeAll(async () => {
  t = await createTestApp({ credentialMasterKey: Buffer.alloc(32, 9), limits: { listPageBytes: BUDGET, rateLimitMax: 0 } });
  const space = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'large states' } });
  spaceId = space.json().spaceId;
  const sessions = `/v1/spaces/${spaceId}/users/u1/sessions`;
  const ids = ['s1', 's2', 's3', 'huge', 's4', 's5', 's6', 's7'];
  for (const sessionId of ids) {
    const own = sessionId === 'huge' ? 'h'.repeat(100_000) : 'n'.repeat(8_000);
    const created = await t.request({ method: 'POST', url: sessions, payload: { sessionId, state: { notes: own } } });
    expect(created.statusCode, created.body).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 2)); // distinct update times
  }
  // The user's and the space's states, which every session of the page carries in its merged state.
  const shared = await t.request({
    method: 'POST',
    url: `${sessions}/s1/events`,
    payload: { author: 'agent', actions: { stateDelta: { 'app:shared': 'a'.repeat(10_000), 'user:profile': 'u'.repeat(10_000) } } },
  });
  expect(shared.statusCode, shared.body).toBe(201);
  newestFirst = ['s1', 's7', 's6', 's5', 's4', 'huge', 's3', 's2'];
});
afterAll(async () => t?.close());

interface Listed {
  sessionId: string;
  state: Record<string, unknown>;
}

const pages = (url: string) => followPages<Listed>(t, url, 'sessions');

const ids = (page: Listed[]) => page.map((session) => session.sessionId);

/** The rows a space's list statement sends within BUDGET, and how many it chose. */
const spaceRows = (listedSpaceId: string, page: Pick<SessionPageRequest, 'orderBy' | 'direction' | 'limit' | 'offset'>) =>
  listSessionRows(t.db, { filter: { accountId: t.account.accountId, spaceId: listedSpaceId }, scope: 'space', maxBytes: BUDGET, ...page });

describe('a session list page within MAX_LIST_PAGE_BYTES', () => {
  it('ends a page before the session that would pass the budget, with a nextPageToken; the pages list every session once, in order', async () => {
    for (const url of [`/v1/spaces/${spaceId}/sessions?pageSize=100`, `/v1/spaces/${spaceId}/users/u1/sessions?pageSize=100&includeTotal=true`]) {
      const listed = await pages(url);
      expect(listed.map(ids)).toEqual([['s1', 's7'], ['s6', 's5'], ['s4'], ['huge'], ['s3', 's2']]);
      for (const page of listed) {
        // Every session carries the shared states whole.
        for (const session of page) expect(session.state).toMatchObject({ 'app:shared': 'a'.repeat(10_000), 'user:profile': 'u'.repeat(10_000) });
        const bytes = page.reduce((sum, session) => sum + stateBytes(session.state), 0);
        if (page.length > 1) expect(bytes).toBeLessThanOrEqual(BUDGET);
      }
    }
    // A pageSize the budget allows is kept; the total counts every session.
    const small = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/sessions?pageSize=1&includeTotal=true` });
    expect(small.json()).toMatchObject({ sessions: [{ sessionId: 's1' }], nextPageToken: expect.any(String), totalCount: 8 });
    expect((await pages(`/v1/spaces/${spaceId}/sessions?pageSize=1`)).flatMap(ids)).toEqual(newestFirst);
    expect((await pages(`/v1/spaces/${spaceId}/sessions?pageSize=100&order=asc`)).flatMap(ids)).toEqual([...newestFirst].reverse());
  });

  it('does not send the rows past the budget from the database', async () => {
    const { rows, candidates } = await spaceRows(spaceId, { orderBy: 'update_time', direction: 'desc', limit: 101 });
    expect(rows.map((row) => row.session_id)).toEqual(['s1', 's7']);
    expect(candidates).toBe(8);
    const offset = await spaceRows(spaceId, { orderBy: 'create_time', direction: 'asc', limit: 3, offset: 2 });
    expect(offset.rows.map((row) => row.session_id)).toEqual(['s3']);
    expect(offset.candidates).toBe(3);
  });

  it('ends the page after a first session whose own state as stored passes the budget (incompressible), and goes on from it whole', async () => {
    // Text that pglz cannot shrink: the state is stored at its full size, more than the budget, so
    // the stored sizes alone rule out every session after it, whose states (and users' states) are
    // then not measured for that page.
    const noise = randomBytes(75_000).toString('base64');
    const other = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'incompressible' } });
    const otherSpace = other.json().spaceId as string;
    const created: [string, string, Record<string, unknown>][] = [
      ['u1', 'small-1', { notes: 'x'.repeat(1_000) }],
      ['u1', 'noise', { notes: noise }],
      ['u2', 'small-2', { digits: Array.from({ length: 500 }, (_, i) => i) }],
      ['u1', 'small-3', { notes: 'z'.repeat(1_000) }],
    ];
    for (const [userId, sessionId, state] of created) {
      const answer = await t.request({ method: 'POST', url: `/v1/spaces/${otherSpace}/users/${userId}/sessions`, payload: { sessionId, state } });
      expect(answer.statusCode, answer.body).toBe(201);
      await new Promise((resolve) => setTimeout(resolve, 2)); // distinct update times
    }
    // u2's own state, which small-2 carries: measured on the page that starts after the noise.
    const profile = await t.request({ method: 'POST', url: `/v1/spaces/${otherSpace}/users/u2/sessions/small-2/events`, payload: { author: 'agent', actions: { stateDelta: { 'user:profile': 'p'.repeat(5_000) } } } });
    expect(profile.statusCode, profile.body).toBe(201);
    const stored = await sql<{ stored: number; measured: number; lowered: boolean }>`
      SELECT pg_column_size(state) AS stored, pg_column_size('{}'::jsonb || state) AS measured,
        bool_and(pg_column_size(state) <= pg_column_size('{}'::jsonb || state)) OVER () AS lowered
      FROM sessions WHERE account_id = ${t.account.accountId} AND space_id = ${otherSpace} ORDER BY session_id = 'noise' DESC`.execute(t.db);
    expect(stored.rows[0]!.stored).toBeGreaterThan(BUDGET);
    // The premise: a state as stored is never larger than as measured (strings, repeats, numbers).
    expect(stored.rows.every((row) => row.lowered)).toBe(true);

    const byCreation = `/v1/spaces/${otherSpace}/sessions?pageSize=100&orderBy=createTime`;
    const ascending = await pages(`${byCreation}&order=asc`);
    expect(ascending.map(ids)).toEqual([['small-1'], ['noise'], ['small-2', 'small-3']]);
    const [, [noisy], [second]] = ascending as [Listed[], [Listed], [Listed, Listed]];
    expect(noisy.state.notes).toBe(noise);
    expect(second.state).toEqual({ digits: Array.from({ length: 500 }, (_, i) => i), 'user:profile': 'p'.repeat(5_000) });
    expect((await pages(`${byCreation}&order=desc`)).map(ids)).toEqual([['small-3', 'small-2'], ['noise'], ['small-1']]);

    // From the noise on: it alone is sent, and the sessions after it were chosen (the page was cut).
    const fromNoise = await spaceRows(otherSpace, { orderBy: 'create_time', direction: 'asc', limit: 101, offset: 1 });
    expect(fromNoise.rows.map((row) => row.session_id)).toEqual(['noise']);
    expect(fromNoise.candidates).toBe(3);
  });

  it('API 3.0: DescribeSessions refuses a Limit whose sessions pass the budget, naming the Limit that fits; smaller Limits page through all', async () => {
    const sdk = sdkClient(await listenOnLoopback(t.app), t.account.rootCredential);
    const before = await tableFingerprints(t.db);
    const refused = await sdkError(sdk.request('DescribeSessions', { SpaceId: spaceId, Limit: 100 }));
    expect(refused.code).toBe('InvalidParameterValue');
    expect(refused.message).toMatch(/^Limit: the 100 sessions from Offset 0 carry more than 65536 bytes .*the first 2 fit, ask a Limit of at most that$/);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);

    const two = (await sdk.request('DescribeSessions', { SpaceId: spaceId, Limit: 2 })) as { TotalCount: number; Sessions: { SessionId: string }[] };
    expect(two.TotalCount).toBe(8);
    expect(two.Sessions.map((session) => session.SessionId)).toEqual(['s1', 's7']);
    const seen: string[] = [];
    for (let offset = 0; offset < 8; offset++) {
      const one = (await sdk.request('DescribeSessions', { SpaceId: spaceId, Limit: 1, Offset: offset })) as { Sessions: { SessionId: string }[] };
      seen.push(...one.Sessions.map((session) => session.SessionId));
    }
    expect(seen).toEqual(newestFirst);
  });
});
