// session_catalog (migrations/0018) holds, for every session, its keys, create time, title and
// metadata: the lists by create time and the search read them there. It is kept by a trigger on
// sessions, so every path that writes a session must leave the two in step: create, a title or
// metadata change, an import (also one replacing an expired session), a delete, the expiry sweep
// (a space is deleted only once it holds no session). An append must not write it at all: that is
// what the table is for. And the
// lists by create time walk it, testing their filters on it; the lists by update time never touch it.
import { DEFAULT_LIMITS } from '../../src/config.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepExpiredSessions } from '../../src/modules/sessions/expiry-sweeper.js';
import { type SessionPageRequest, listSessionRows } from '../../src/modules/sessions/sessions.repository.js';
import { insertSpace } from '../support/fixtures.js';
import { planNodes, planOf, recordOneStatement } from '../support/query-plans.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const sessionsUrl = (spaceId: string, userId = 'u1') => `/v1/spaces/${spaceId}/users/${userId}/sessions`;

/** What the catalog must hold for the space: each session's keys, create time, title and metadata, as sessions has them. */
async function expectCatalogInStep(spaceId: string): Promise<number> {
  const projection = sql`account_id, space_id, user_id, session_id, create_time, title, metadata`;
  const fromSessions = await sql`SELECT ${projection} FROM sessions WHERE space_id = ${spaceId} ORDER BY user_id, session_id`.execute(t.db);
  const fromCatalog = await sql`SELECT ${projection} FROM session_catalog WHERE space_id = ${spaceId} ORDER BY user_id, session_id`.execute(t.db);
  expect(fromCatalog.rows).toEqual(fromSessions.rows);
  return fromCatalog.rows.length;
}

/** The catalog row's and the session row's row versions (xmin): a write of either changes its own. */
async function rowVersions(spaceId: string, sessionId: string) {
  const version = async (table: 'sessions' | 'session_catalog') =>
    (await sql<{ xmin: string }>`SELECT xmin::text FROM ${sql.table(table)} WHERE space_id = ${spaceId} AND session_id = ${sessionId}`.execute(t.db)).rows[0]?.xmin;
  return { session: await version('sessions'), catalog: await version('session_catalog') };
}

describe('session_catalog', () => {
  it('follows every write of a session: create, title and metadata changes, import, delete, expiry sweep', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    for (const [userId, sessionId, payload] of [
      ['u1', 'bare', {}],
      ['u1', 'titled', { title: 'Trip to Lyon', metadata: { env: 'prod' } }],
      ['u2', 'other', { title: 'x', metadata: { env: 'dev', team: 'a' } }],
      ['u2', 'short-lived', { ttlSeconds: 600 }],
    ] as const) {
      const created = await t.request({ method: 'POST', url: sessionsUrl(spaceId, userId), payload: { sessionId, ...payload } });
      expect(created.statusCode, created.body).toBe(201);
    }
    expect(await expectCatalogInStep(spaceId)).toBe(4);

    expect((await t.request({ method: 'PATCH', url: `${sessionsUrl(spaceId)}/titled`, payload: { title: 'Trip to Nice' } })).statusCode).toBe(200);
    expect((await t.request({ method: 'PATCH', url: `${sessionsUrl(spaceId)}/bare`, payload: { metadata: { env: 'test' } } })).statusCode).toBe(200);
    expect((await t.request({ method: 'PATCH', url: `${sessionsUrl(spaceId, 'u2')}/other`, payload: { metadata: { team: null } } })).statusCode).toBe(200);
    await expectCatalogInStep(spaceId);

    // An import: a new session, then the same document again over the expired copy (delete and insert).
    const exported = await t.request({ method: 'GET', url: `${sessionsUrl(spaceId)}/titled/export` });
    expect(exported.statusCode).toBe(200);
    const target = await insertSpace(t.db, t.account.accountId);
    expect((await t.request({ method: 'POST', url: `/v1/spaces/${target}/sessions/import`, payload: exported.json() })).statusCode).toBe(201);
    expect(await expectCatalogInStep(target)).toBe(1);
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('space_id', '=', target).execute();
    expect((await t.request({ method: 'POST', url: `/v1/spaces/${target}/sessions/import`, payload: exported.json() })).statusCode).toBe(201);
    expect(await expectCatalogInStep(target)).toBe(1);

    expect((await t.request({ method: 'DELETE', url: `${sessionsUrl(spaceId)}/bare` })).statusCode).toBe(204);
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('space_id', '=', spaceId).where('session_id', '=', 'short-lived').execute();
    while ((await sweepExpiredSessions(t.db, { batchSize: 1000 })) > 0);
    expect(await expectCatalogInStep(spaceId)).toBe(2);
  });

  it('is not written by an append, which writes only the session row and its events', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    expect((await t.request({ method: 'POST', url: sessionsUrl(spaceId), payload: { sessionId: 's', title: 'kept', metadata: { env: 'prod' } } })).statusCode).toBe(201);
    const before = await rowVersions(spaceId, 's');
    const appended = await t.request({
      method: 'POST',
      url: `${sessionsUrl(spaceId)}/s/events`,
      payload: { events: [{ author: 'user', actions: { stateDelta: { step: 1 } } }, { author: 'agent' }] },
    });
    expect(appended.statusCode, appended.body).toBe(201);
    const after = await rowVersions(spaceId, 's');
    expect(after.session).not.toBe(before.session);
    expect(after.catalog).toBe(before.catalog);
    await expectCatalogInStep(spaceId);
  });

  it('serves the lists by create time, their metadata filters with them, expiry and update time checked on sessions; the lists by update time never read it', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    for (let i = 0; i < 5; i++) expect((await t.request({ method: 'POST', url: sessionsUrl(spaceId, `u${i % 2}`), payload: { sessionId: `s${i}` } })).statusCode).toBe(201);
    // Enough sessions besides them that a plan walks an index rather than reading the space whole.
    await sql`INSERT INTO space_users (account_id, space_id, user_id) VALUES (${t.account.accountId}, ${spaceId}, 'many')`.execute(t.db);
    await sql`
      INSERT INTO sessions (account_id, space_id, user_id, session_id, metadata, create_time, update_time)
      SELECT ${t.account.accountId}, ${spaceId}, 'many', 'm' || g, jsonb_build_object('env', CASE WHEN g % 10 = 0 THEN 'staging' ELSE 'prod' END),
             now() + make_interval(days => 1, secs => g), now() + make_interval(days => 1, secs => g)
      FROM generate_series(1, 3000) AS g`.execute(t.db);
    await sql`ANALYZE sessions, session_catalog`.execute(t.db);
    const list = (request: Pick<SessionPageRequest, 'orderBy' | 'scope'> & { userIds?: string[]; env?: string; updatedAfter?: Date }) =>
      recordOneStatement(t.database.pool, (db) =>
        listSessionRows(db, {
          filter: {
            accountId: t.account.accountId,
            spaceId,
            ...(request.userIds ? { userIds: request.userIds } : {}),
            ...(request.env ? { metadata: new Map([['env', [request.env]]]) } : {}),
            ...(request.updatedAfter ? { updatedAfter: request.updatedAfter } : {}),
          },
          orderBy: request.orderBy,
          scope: request.scope,
          direction: 'asc',
          limit: 10,
          maxBytes: DEFAULT_LIMITS.listPageBytes,
        }).then((page) => page.rows),
      );
    const indexesOf = async (statement: Awaited<ReturnType<typeof list>>['statement']) =>
      planNodes(await planOf(t.database.pool, statement)).flatMap((node) => (node['Index Name'] ? [node['Index Name']] : []));
    const relationsOf = async (statement: Awaited<ReturnType<typeof list>>['statement']) =>
      planNodes(await planOf(t.database.pool, statement)).flatMap((node) => (node['Relation Name'] ? [node['Relation Name']] : []));

    const byCreate = await list({ orderBy: 'create_time', scope: 'space' });
    // The five made through the API first (in any order: two may share a millisecond), then the oldest five of the rest.
    const firstFiveThenOldest = (ids: string[]) => [...ids.slice(0, 5).sort(), ...ids.slice(5)];
    expect(firstFiveThenOldest(byCreate.result.map((row) => row.session_id))).toEqual(['s0', 's1', 's2', 's3', 's4', 'm1', 'm2', 'm3', 'm4', 'm5']);
    expect(await indexesOf(byCreate.statement)).toContain('session_catalog_space_by_create');
    const oneUserByCreate = await list({ orderBy: 'create_time', scope: 'user', userIds: ['many'] });
    expect(oneUserByCreate.result.map((row) => row.session_id)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9', 'm10']);
    // 'many' holds nearly every session of the space: either list of create times serves it.
    expect(await indexesOf(oneUserByCreate.statement)).toEqual(expect.arrayContaining([expect.stringMatching(/^session_catalog_(user|space)_by_create$/)]));

    // A metadata filter is tested on the catalog's rows (the plans at a million sessions, where the
    // order's index is walked: bench:read, bench/README.md).
    const broadByCreate = await list({ orderBy: 'create_time', scope: 'space', env: 'prod' });
    expect(broadByCreate.result.map((row) => row.session_id)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9', 'm11']);
    expect(await relationsOf(broadByCreate.statement)).toContain('session_catalog');
    const narrowByCreate = await list({ orderBy: 'create_time', scope: 'space', env: 'staging' });
    expect(narrowByCreate.result.map((row) => row.session_id)).toEqual(['m10', 'm20', 'm30', 'm40', 'm50', 'm60', 'm70', 'm80', 'm90', 'm100']);
    // By update time, the same filter is tested on sessions, as the walk of its index goes: no catalog.
    const broadByUpdate = await list({ orderBy: 'update_time', scope: 'space', env: 'prod' });
    expect(broadByUpdate.result.map((row) => row.session_id)).toEqual(['m1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9', 'm11']);
    expect(await relationsOf(broadByUpdate.statement)).not.toContain('session_catalog');

    const byUpdate = await list({ orderBy: 'update_time', scope: 'space' });
    expect(firstFiveThenOldest(byUpdate.result.map((row) => row.session_id))).toEqual(['s0', 's1', 's2', 's3', 's4', 'm1', 'm2', 'm3', 'm4', 'm5']);
    expect(await relationsOf(byUpdate.statement)).not.toContain('session_catalog');

    // What only sessions holds rules a session out of a list by create time: its expiry, its update time.
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('space_id', '=', spaceId).where('session_id', '=', 'm2').execute();
    const live = await list({ orderBy: 'create_time', scope: 'space', env: 'prod' });
    expect(live.result.map((row) => row.session_id)).toEqual(['m1', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8', 'm9', 'm11', 'm12']);
    const m5 = await t.db.selectFrom('sessions').select('update_time').where('space_id', '=', spaceId).where('session_id', '=', 'm5').executeTakeFirstOrThrow();
    // A millisecond on: the seeded times have microseconds, which a Date drops.
    const updatedLater = await list({ orderBy: 'create_time', scope: 'space', env: 'prod', updatedAfter: new Date(m5.update_time.getTime() + 1) });
    expect(updatedLater.result.map((row) => row.session_id)).toEqual(['m6', 'm7', 'm8', 'm9', 'm11', 'm12', 'm13', 'm14', 'm15', 'm16']);
  });
});
