// API 3.0 Offset paging (DescribeEvents, DescribeSessions, DescribeSessionSpaces) is bounded: the rows before the Offset
// are skipped in the database on their keys alone, never read whole or brought into the process
// (reading them here is what lets one request's memory grow with the history), and an Offset past
// MAX_OFFSET is refused.
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type CompiledQuery, type Kysely, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DB, EventRow } from '../../src/db/schema.js';
import { type EventFilters, listEvents } from '../../src/modules/events/events.repository.js';
import { listSessionRows } from '../../src/modules/sessions/sessions.repository.js';
import { listSpaces } from '../../src/modules/spaces/spaces.repository.js';
import { MAX_OFFSET } from '../../src/modules/tencent/tc3-models.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { listenOnLoopback, sdkClient, sdkError, type Tc3Client } from '../support/tencent-client.js';
import { type PlanNode, planNodes, planOf, recordOneStatement } from '../support/query-plans.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const EVENTS = 300;
const SESSIONS = 250;
const USER = 'u';

let t: TestApp;
let sdk: Tc3Client;
let spaceId: string;
const long = () => ({ accountId: t.account.accountId, spaceId, userId: USER, sessionId: 'long' });

beforeAll(async () => {
  t = await createTestApp({ credentialMasterKey: Buffer.alloc(32, 3), limits: { rateLimitMax: 0 } });
  sdk = sdkClient(await listenOnLoopback(t.app), t.account.rootCredential);
  spaceId = await insertSpace(t.db, t.account.accountId, 'offsets');
  await insertSession(t.db, long());
  // Every third event by 'user', the others by 'agent'; content of a few kB each.
  await sql`
    INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, author, content, event_time, payload_hash)
    SELECT ${t.account.accountId}, ${spaceId}, ${USER}, 'long', g, 'e-' || g, CASE WHEN g % 3 = 0 THEN 'user' ELSE 'agent' END,
           jsonb_build_object('parts', jsonb_build_array(jsonb_build_object('text', repeat('x', 4000) || g))),
           timestamptz '2026-01-01' + make_interval(secs => g), '\\x00'::bytea
    FROM generate_series(1, ${EVENTS}::int) AS g`.execute(t.db);
  await sql`
    INSERT INTO space_users (account_id, space_id, user_id, session_count)
    SELECT ${t.account.accountId}, ${spaceId}, 'user-' || (g % 10), count(*) FROM generate_series(1, ${SESSIONS}::int) AS g GROUP BY g % 10
    ON CONFLICT (account_id, space_id, user_id) DO UPDATE SET session_count = space_users.session_count + excluded.session_count`.execute(t.db);
  await sql`
    INSERT INTO sessions (account_id, space_id, user_id, session_id, state, update_time)
    SELECT ${t.account.accountId}, ${spaceId}, 'user-' || (g % 10), 'sess-' || g, jsonb_build_object('big', repeat('s', 4000)), now() - make_interval(secs => g)
    FROM generate_series(1, ${SESSIONS}::int) AS g`.execute(t.db);
  await sql`ANALYZE events`.execute(t.db);
  await sql`ANALYZE sessions`.execute(t.db);
});
afterAll(async () => t?.close());

type Fields = Record<string, unknown>;
const call = (action: string, params: Fields) => sdk.request(action, params) as Promise<Fields>;
const sessionKey = { SpaceId: () => spaceId, UserId: USER, SessionId: 'long' };
const eventsKey = () => ({ SpaceId: sessionKey.SpaceId(), UserId: USER, SessionId: 'long' });

/** Every item of a REST list, following its page tokens. */
async function restListing<T>(url: string, items: (body: Fields) => T[]): Promise<T[]> {
  const all: T[] = [];
  let pageToken: string | undefined;
  do {
    const res = await t.request({ method: 'GET', url: `${url}${url.includes('?') ? '&' : '?'}pageSize=100${pageToken ? `&pageToken=${encodeURIComponent(pageToken)}` : ''}` });
    expect(res.statusCode, res.body).toBe(200);
    all.push(...items(res.json()));
    pageToken = res.json().nextPageToken;
  } while (pageToken);
  return all;
}

describe('an Offset inside the range', () => {
  it('answers DescribeEvents the page the full listing has there, with or without a filter', async () => {
    const eventsUrl = `/v1/spaces/${spaceId}/users/${USER}/sessions/long/events`;
    const all = await restListing(eventsUrl, (body) => (body.events as { eventId: string }[]).map((event) => event.eventId));
    expect(all).toHaveLength(EVENTS);
    const page = async (fields: Fields) => {
      const answer = (await call('DescribeEvents', { ...eventsKey(), ...fields })) as { Events: { EventId: string }[]; TotalCount: number };
      return { ids: answer.Events.map((event) => event.EventId), total: answer.TotalCount };
    };
    expect(await page({ Offset: 250, Limit: 20 })).toEqual({ ids: all.slice(250, 270), total: EVENTS });
    expect(await page({ Offset: 290, Limit: 50 })).toEqual({ ids: all.slice(290), total: EVENTS });
    expect(await page({ Offset: EVENTS, Limit: 50 })).toEqual({ ids: [], total: EVENTS });

    const byUser = await restListing(`${eventsUrl}?author=user`, (body) => (body.events as { eventId: string }[]).map((event) => event.eventId));
    expect(byUser).toHaveLength(EVENTS / 3);
    expect(await page({ Author: 'user', Offset: 60, Limit: 30 })).toEqual({ ids: byUser.slice(60, 90), total: EVENTS / 3 });
    const afterIndex = 100; // AfterTimestamp is exclusive: the events after e-100
    expect(await page({ AfterTimestamp: '2026-01-01T00:01:40Z', Offset: 150, Limit: 10 })).toEqual({ ids: all.slice(afterIndex + 150, afterIndex + 160), total: EVENTS - afterIndex });
  });

  it('answers DescribeSessions the page the full listing has there (newest update first)', async () => {
    const all = await restListing(`/v1/spaces/${spaceId}/sessions`, (body) => (body.sessions as { userId: string; sessionId: string }[]).map((s) => `${s.userId}/${s.sessionId}`));
    expect(all).toHaveLength(SESSIONS + 1);
    const page = async (fields: Fields) => {
      const answer = (await call('DescribeSessions', { SpaceId: spaceId, ...fields })) as { Sessions: { UserId: string; SessionId: string }[]; TotalCount: number };
      return { ids: answer.Sessions.map((s) => `${s.UserId}/${s.SessionId}`), total: answer.TotalCount };
    };
    expect(await page({ Offset: 200, Limit: 30 })).toEqual({ ids: all.slice(200, 230), total: SESSIONS + 1 });
    expect(await page({ Offset: 240, Limit: 100 })).toEqual({ ids: all.slice(240), total: SESSIONS + 1 });
    const ofUser3 = all.filter((id) => id.startsWith('user-3/'));
    expect(await page({ UserIds: ['user-3'], Offset: 10, Limit: 5 })).toEqual({ ids: ofUser3.slice(10, 15), total: ofUser3.length });
  });
  it('answers DescribeSessionSpaces the page the full listing has there (oldest first), filters applied in the database', async () => {
    for (let i = 0; i < 12; i++) await insertSpace(t.db, t.account.accountId, `paged ${i % 3} ${i}`);
    const all = await restListing('/v1/spaces', (body) => (body.spaces as { spaceId: string }[]).map((space) => space.spaceId));
    const page = async (fields: Fields) => {
      const answer = (await call('DescribeSessionSpaces', fields)) as { SessionSpaces: { SpaceId: string }[]; TotalCount: number };
      return { ids: answer.SessionSpaces.map((space) => space.SpaceId), total: answer.TotalCount };
    };
    expect(await page({ Offset: 5, Limit: 4 })).toEqual({ ids: all.slice(5, 9), total: all.length });
    const named = await restListing('/v1/spaces?nameLike=paged', (body) => (body.spaces as { spaceId: string; name: string }[]).filter((space) => !space.name.startsWith('paged 2')).map((space) => space.spaceId));
    expect(await page({ Filters: [{ Name: 'name-like', Values: ['paged 0', 'paged 1'] }], Offset: 3, Limit: 3 })).toEqual({ ids: named.slice(3, 6), total: 8 });
  });
});

describe('an Offset past MAX_OFFSET', () => {
  it(`is refused with InvalidParameterValue naming Offset and the rule (${MAX_OFFSET}), on each list action, changing nothing`, async () => {
    const before = await tableFingerprints(t.db);
    const lists: [string, Fields][] = [
      ['DescribeEvents', eventsKey()],
      ['DescribeSessions', { SpaceId: spaceId }],
      ['DescribeSessionSpaces', {}],
    ];
    for (const [action, fields] of lists) {
      for (const Offset of [MAX_OFFSET + 1, 1e12]) {
        const error = await sdkError(call(action, { ...fields, Offset, Limit: 1 }));
        expect(error.code).toBe('InvalidParameterValue');
        expect(error.message).toMatch(new RegExp(`^Offset: must be at most ${MAX_OFFSET}\\b`));
      }
      // The maximum itself is served (an empty page here).
      expect(((await call(action, { ...fields, Offset: MAX_OFFSET, Limit: 1 })) as { TotalCount: number }).TotalCount).toBeGreaterThan(0);
    }
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });
});

/** Runs `list` through a Kysely that records its one statement. */
async function recorded(list: (db: Kysely<DB>) => Promise<unknown[]>): Promise<{ rows: unknown[]; statement: CompiledQuery }> {
  const { result: rows, statement } = await recordOneStatement(t.database.pool, list);
  return { rows, statement };
}

/** The nodes of the plan at and under each Limit node, and the rest, of EXPLAIN VERBOSE. */
async function limitSubtrees(statement: CompiledQuery): Promise<PlanNode[][]> {
  const subtrees: PlanNode[][] = [];
  const walk = (node: PlanNode) => {
    if (node['Node Type'] === 'Limit') subtrees.push(planNodes(node));
    else node.Plans?.forEach(walk);
  };
  walk(await planOf(t.database.pool, statement, { verbose: true }));
  return subtrees;
}

/** The columns the scans of `table` under `nodes` output. */
const scannedColumns = (nodes: PlanNode[], table: string) =>
  new Set(nodes.filter((node) => node['Relation Name'] === table).flatMap((node) => (node.Output ?? []).map((column) => column.replace(/^.*\./, ''))));

describe('the seek is done in SQL, on keys alone', () => {
  it('DescribeEvents: the offset is a LIMIT … OFFSET of the statement, whose scan under it outputs only seq', async () => {
    for (const filters of [{}, { author: 'user' }, { after: new Date('2026-01-01T00:01:40Z') }]) {
      const { rows, statement } = await recorded((db) => listEvents(db, long(), filters, { order: 'asc', limit: 21, offset: 60 }, DEFAULT_LIMITS.listPageBytes).then((page) => page.rows));
      expect(rows).toHaveLength(21);
      expect(statement.sql).toMatch(/\blimit \$\d+ offset \$\d+/);
      const subtrees = await limitSubtrees(statement);
      expect(subtrees).toHaveLength(1);
      // The skipped rows are scanned for their seq only: no content, actions or metadata of theirs.
      expect(scannedColumns(subtrees[0]!, 'events')).toEqual(new Set(['seq']));
    }
  });

  it('a filtered page without an offset walks the primary key for seqs alone, testing author and time on its entries (migrations/0017)', async () => {
    // All-visible pages, as autovacuum leaves an append-only table: the walk then reads no row.
    await sql`VACUUM (ANALYZE) events`.execute(t.db);
    const cases: [EventFilters, (row: EventRow) => boolean][] = [
      [{ author: 'user' }, (row) => row.author === 'user'],
      [{ after: new Date('2026-01-01T00:01:40Z') }, (row) => Number(row.seq) > 100],
      [{ before: new Date('2026-01-01T00:01:40Z'), author: 'agent' }, (row) => Number(row.seq) < 100 && row.author === 'agent'],
    ];
    for (const [filters, matches] of cases) {
      const { rows, statement } = await recorded((db) => listEvents(db, long(), filters, { order: 'asc', limit: 21 }, DEFAULT_LIMITS.listPageBytes).then((page) => page.rows));
      expect(rows).toHaveLength(21);
      expect((rows as EventRow[]).every(matches)).toBe(true);
      const subtrees = await limitSubtrees(statement);
      expect(subtrees).toHaveLength(1);
      const scans = subtrees[0]!.filter((node) => node['Relation Name'] === 'events');
      expect(scans.map((node) => `${node['Node Type']} ${node['Index Name']}`)).toEqual(['Index Only Scan events_pkey']);
      expect(scannedColumns(subtrees[0]!, 'events')).toEqual(new Set(['seq']));
    }
  });

  it('DescribeSessions: the scan under LIMIT … OFFSET outputs only the keys and the order column', async () => {
    const { rows, statement } = await recorded((db) =>
      listSessionRows(db, { filter: { accountId: t.account.accountId, spaceId }, orderBy: 'update_time', direction: 'desc', scope: 'space', limit: 21, offset: 200, maxBytes: DEFAULT_LIMITS.listPageBytes }).then((page) => page.rows),
    );
    expect(rows).toHaveLength(21);
    expect(statement.sql).toMatch(/\blimit \$\d+ offset \$\d+/);
    const subtrees = await limitSubtrees(statement);
    expect(subtrees).toHaveLength(1);
    const columns = scannedColumns(subtrees[0]!, 'sessions');
    expect([...columns].filter((column) => !['account_id', 'space_id', 'user_id', 'session_id', 'update_time'].includes(column))).toEqual([]);
    expect(columns.has('session_id')).toBe(true);
  });

  it('DescribeSessionSpaces: the scan under LIMIT … OFFSET outputs only the keys and the order column', async () => {
    const { rows, statement } = await recorded((db) => listSpaces(db, t.account.accountId, {}, undefined, 3, 4));
    expect(rows).toHaveLength(3);
    expect(statement.sql).toMatch(/\blimit \$\d+ offset \$\d+/);
    const subtrees = await limitSubtrees(statement);
    expect(subtrees).toHaveLength(1);
    const columns = scannedColumns(subtrees[0]!, 'session_spaces');
    expect([...columns].filter((column) => !['account_id', 'space_id', 'create_time'].includes(column))).toEqual([]);
    expect(columns.has('space_id')).toBe(true);
  });
});
