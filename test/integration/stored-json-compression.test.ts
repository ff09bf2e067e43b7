// Migration 0020: the tenants' stored JSON is compressed with lz4 where the server has it (PostgreSQL
// as Debian builds it), and with pglz as before where it has not (PGlite). Every jsonb column of the
// tenant tables is checked, so a column added later without saying its compression is caught here.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { type TestApp, createTestApp } from '../support/test-app.js';

const TENANT_TABLES = ['events', 'sessions', 'session_catalog', 'state_checkpoints', 'space_users', 'session_spaces'];

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const serverHasLz4 = async () =>
  (await sql<{ lz4: boolean }>`SELECT 'lz4' = ANY (enumvals) AS lz4 FROM pg_settings WHERE name = 'default_toast_compression'`.execute(t.db)).rows[0]!.lz4;

it('knows which method the backend has: lz4 on PostgreSQL, pglz only on PGlite', async () => {
  expect(await serverHasLz4()).toBe(inject('testBackend').kind === 'postgres');
});

it('sets lz4 on every jsonb column of the tenant tables where the server has it, and leaves the default elsewhere', async () => {
  const columns = (
    await sql<{ table_name: string; column_name: string; compression: string }>`
      SELECT c.relname AS table_name, a.attname AS column_name, a.attcompression::text AS compression
      FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid JOIN pg_namespace AS n ON n.oid = c.relnamespace
      WHERE n.nspname = current_schema() AND c.relname = ANY (${TENANT_TABLES}::text[])
        AND a.atttypid = 'jsonb'::regtype AND a.attnum > 0 AND NOT a.attisdropped
      ORDER BY 1, 2`.execute(t.db)
  ).rows;
  expect(columns.map((column) => `${column.table_name}.${column.column_name}`)).toEqual([
    'events.actions',
    'events.content',
    'events.extensions',
    'events.metadata',
    'session_catalog.metadata',
    'session_spaces.state',
    'sessions.initial_state',
    'sessions.memo',
    'sessions.metadata',
    'sessions.state',
    'space_users.state',
    'state_checkpoints.state',
  ]);
  // attcompression: 'l' lz4, 'p' pglz, '' the server's default_toast_compression (pglz unless set).
  const expected = (await serverHasLz4()) ? 'l' : '';
  expect(new Set(columns.map((column) => column.compression))).toEqual(new Set([expected]));
});

it('stores a large state and a large event compressed by that method, and reads them back as they were written', async () => {
  const base = `/v1/spaces/${t.account.defaultSpaceId}/users/u-1/sessions`;
  expect((await t.request({ method: 'POST', url: base, payload: { sessionId: 'heavy' } })).statusCode).toBe(201);
  // Text that compresses well, over the 2 kB past which PostgreSQL compresses a value.
  const paragraph = (n: number) => `paragraph ${n}: `.padEnd(2_000, 'the state of an agent, written again and again; ');
  const stateDelta = Object.fromEntries(Array.from({ length: 20 }, (_, k) => [`note_${k}`, paragraph(k)]));
  const content = { role: 'model', parts: [{ text: paragraph(99).repeat(10) }] };
  const appended = await t.request({ method: 'POST', url: `${base}/heavy/events`, payload: { author: 'agent', content, actions: { stateDelta } } });
  expect(appended.statusCode).toBe(201);

  const method = (await serverHasLz4()) ? 'lz4' : 'pglz';
  const stored = (
    await sql<{ state: string | null; content: string | null; state_bytes: number; text_bytes: number }>`
      SELECT pg_column_compression(s.state) AS state, pg_column_compression(e.content) AS content,
             pg_column_size(s.state) AS state_bytes, octet_length(s.state::text) AS text_bytes
      FROM sessions AS s JOIN events AS e USING (account_id, space_id, user_id, session_id)
      WHERE s.account_id = ${t.account.accountId} AND s.session_id = 'heavy'`.execute(t.db)
  ).rows;
  expect(stored).toHaveLength(1);
  expect(stored[0]).toMatchObject({ state: method, content: method });
  expect(stored[0]!.state_bytes).toBeLessThan(stored[0]!.text_bytes / 4);

  const context = await t.request({ method: 'GET', url: `${base}/heavy/context?maxEvents=10` });
  expect(context.statusCode).toBe(200);
  const read = context.json() as { session: { state: Record<string, unknown> }; events: { content: unknown }[] };
  expect(read.session.state).toEqual(stateDelta);
  expect(read.events.map((event) => event.content)).toEqual([content]);
});
