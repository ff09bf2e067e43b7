// The metadata filter of session lists is served by the space-scoped GIN index of
// migrations/0003_read_indexes.sql, and a title search by the trigram index; since migrations/0015
// both are partial (only sessions with metadata, with a title). Since migrations/0018 the lists by
// create time walk session_catalog, the table of what appends never change, which has its own copy
// of both for them (test/integration/session-catalog.test.ts). An index serves only the exact
// expression, and a partial one only a query that states its predicate; if the repository and the
// indexes drift apart the list still answers correctly, only by scanning the space, so this checks
// the plan of the query the repository really issues.
import { DEFAULT_LIMITS } from '../../src/config.js';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type SessionFilter, listSessionRows } from '../../src/modules/sessions/sessions.repository.js';
import { insertSpace } from '../support/fixtures.js';
import { planNodes, planOf, recordOneStatement } from '../support/query-plans.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const SESSIONS_PER_SPACE = 2000;
const AGENTS = 200; // 10 sessions per agent and space

let t: TestApp;
let spaces: [string, string];
beforeAll(async () => {
  t = await createTestApp();
  const accountId = t.account.accountId;
  spaces = [await insertSpace(t.db, accountId, 'one'), await insertSpace(t.db, accountId, 'two')];
  for (const spaceId of spaces) {
    await sql`
      INSERT INTO space_users (account_id, space_id, user_id, session_count)
      SELECT ${accountId}, ${spaceId}, 'user-' || (g % 20), count(*) FROM generate_series(1, ${SESSIONS_PER_SPACE}::int) AS g GROUP BY g % 20`.execute(t.db);
    await sql`
      INSERT INTO sessions (account_id, space_id, user_id, session_id, title, metadata, update_time)
      SELECT ${accountId}, ${spaceId}, 'user-' || (g % 20), 'sess-' || g,
             CASE WHEN g % 10 = 0 THEN 'Trip to ' || g ELSE '' END,
             jsonb_build_object('example.com/agent-id', 'agent-' || (g % ${AGENTS}::int), 'env', 'prod'),
             now() - make_interval(secs => g)
      FROM generate_series(1, ${SESSIONS_PER_SPACE}::int) AS g`.execute(t.db);
  }
  await sql`ANALYZE sessions, session_catalog`.execute(t.db);
});
afterAll(async () => t.close());

/** Runs the repository's list query through a Kysely that records it, and answers rows and statement. */
async function listRecorded(spaceId: string, filter: Pick<SessionFilter, 'metadata' | 'titleLike'>) {
  const { result: rows, statement } = await recordOneStatement(t.database.pool, (db) =>
    listSessionRows(db, {
      filter: { accountId: t.account.accountId, spaceId, ...filter },
      orderBy: 'update_time',
      direction: 'desc',
      scope: 'space',
      limit: 21,
      maxBytes: DEFAULT_LIMITS.listPageBytes,
    }).then((page) => page.rows),
  );
  return { rows, statement };
}

describe('session list plans', () => {
  it('finds the sessions of one metadata value through the space-scoped index, and only those of the space', async () => {
    const [one] = spaces;
    const { rows, statement } = await listRecorded(one, { metadata: new Map([['example.com/agent-id', ['agent-7']]]) });

    // The same value exists in the other space: only this space's ten sessions are answered.
    expect(rows).toHaveLength(SESSIONS_PER_SPACE / AGENTS);
    expect(new Set(rows.map((row) => row.space_id))).toEqual(new Set([one]));
    expect(rows.every((row) => row.metadata['example.com/agent-id'] === 'agent-7')).toBe(true);

    const nodes = planNodes(await planOf(t.database.pool, statement));
    expect(nodes.map((node) => node['Index Name'])).toContain('sessions_metadata_in_space');
    expect(nodes.filter((node) => node['Node Type'] === 'Seq Scan' && ['sessions', 'session_catalog'].includes(node['Relation Name'] ?? ''))).toEqual([]);
  });

  it('finds a title through the trigram index of titles, which leaves out the sessions without one', async () => {
    const [one] = spaces;
    const { rows, statement } = await listRecorded(one, { titleLike: 'rip to 1230' });
    expect(rows.map((row) => [row.session_id, row.title])).toEqual([['sess-1230', 'Trip to 1230']]);

    const nodes = planNodes(await planOf(t.database.pool, statement));
    expect(nodes.map((node) => node['Index Name'])).toContain('sessions_title_trgm');
    expect(nodes.filter((node) => node['Node Type'] === 'Seq Scan' && ['sessions', 'session_catalog'].includes(node['Relation Name'] ?? ''))).toEqual([]);
  });

  it('keeps sessions without metadata or title out of the search indexes; the lists by create time and the session id lookup are on the catalog, which no append writes', async () => {
    const definitions = await sql<{ tablename: string; indexname: string; indexdef: string }>`
      SELECT tablename, indexname, indexdef FROM pg_indexes WHERE tablename IN ('sessions', 'session_catalog') ORDER BY tablename, indexname`.execute(t.db);
    expect(definitions.rows.map((row) => [row.tablename, row.indexname, row.indexdef.replace(/.* USING /, '')])).toEqual([
      ['session_catalog', 'session_catalog_metadata_in_space', "gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops) WHERE (metadata <> '{}'::jsonb)"],
      ['session_catalog', 'session_catalog_pkey', 'btree (account_id, space_id, user_id, session_id)'],
      ['session_catalog', 'session_catalog_space_by_create', 'btree (account_id, space_id, create_time, user_id, session_id)'],
      ['session_catalog', 'session_catalog_space_by_session_id', 'btree (account_id, space_id, session_id)'],
      ['session_catalog', 'session_catalog_title_trgm', "gin (title gin_trgm_ops) WHERE (title <> ''::text)"],
      ['session_catalog', 'session_catalog_user_by_create', 'btree (account_id, space_id, user_id, create_time, session_id)'],
      ['sessions', 'sessions_expiring', 'btree (expire_time) WHERE (expire_time IS NOT NULL)'],
      ['sessions', 'sessions_metadata_in_space', "gin (jsonb_set('{}'::jsonb, ARRAY[space_id], metadata) jsonb_path_ops) WHERE (metadata <> '{}'::jsonb)"],
      ['sessions', 'sessions_pkey', 'btree (account_id, space_id, user_id, session_id)'],
      ['sessions', 'sessions_space_by_update', 'btree (account_id, space_id, update_time, user_id, session_id)'],
      ['sessions', 'sessions_title_trgm', "gin (title gin_trgm_ops) WHERE (title <> ''::text)"],
      ['sessions', 'sessions_user_by_update', 'btree (account_id, space_id, user_id, update_time, session_id)'],
    ]);
  });
});
