// The context read, its further pages, the events list's pages and describe are named statements
// (src/modules/context/context.repository.ts, src/modules/events/events.repository.ts,
// src/modules/sessions/session-json.repository.ts), planned once per connection for any session.
// PostgreSQL plans a named statement's first five runs for their values, and goes on doing so while
// those plans look cheaper than its plan for any values: with its events found by the parameters, a
// short session's read beside a long session's history did, and every read was planned again.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type TestApp, createTestApp } from '../support/test-app.js';

// Long enough that the statement as it was got stuck on plans for the short session's key (13 of
// 13 reads); beside 20,000 events it still took the one plan after five.
const LONG_HISTORY = 80_000;

let t: TestApp;
beforeAll(async () => {
  // One connection: its prepared statements are the ones the check below reads.
  t = await createTestApp({ poolMax: 1 });
});
afterAll(async () => t.close());

it('keeps one plan for each named read (the context, its pages, the events list, describe) on a connection whose first reads are of a short session beside a long one', async () => {
  const spaceId = t.account.defaultSpaceId;
  const base = `/v1/spaces/${spaceId}/users/u-1/sessions`;
  for (const sessionId of ['long', 'short']) expect((await t.request({ method: 'POST', url: base, payload: { sessionId } })).statusCode).toBe(201);
  // The long history is written directly: the planner's statistics, not the appends, are the point.
  await sql`
    INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, author, content, event_time, create_time, payload_hash)
    SELECT ${t.account.accountId}, ${spaceId}, 'u-1', 'long', g, 'e-' || g, 'user', '{"role":"user","parts":[{"text":"hi"}]}', now(), now(), sha256(g::text::bytea)
    FROM generate_series(1, ${LONG_HISTORY}) AS g`.execute(t.db);
  await sql`UPDATE sessions SET event_count = ${LONG_HISTORY} WHERE session_id = 'long'`.execute(t.db);
  for (let i = 0; i < 3; i++) {
    expect((await t.request({ method: 'POST', url: `${base}/short/events`, payload: { author: 'user', content: { role: 'user', parts: [{ text: `turn ${i}` }] } } })).statusCode).toBe(201);
  }
  await sql`ANALYZE events`.execute(t.db);
  await sql`ANALYZE sessions`.execute(t.db);

  for (let i = 0; i < 12; i++) {
    const read = await t.request({ method: 'GET', url: `${base}/short/context?maxEvents=50` });
    expect(read.statusCode).toBe(200);
    expect((read.json() as { events: { seq: number }[] }).events.map((event) => event.seq)).toEqual([1, 2, 3]);
  }
  const long = await t.request({ method: 'GET', url: `${base}/long/context?maxEvents=50` });
  expect((long.json() as { events: { seq: number }[] }).events.map((event) => event.seq)).toEqual(Array.from({ length: 50 }, (_, k) => LONG_HISTORY - 49 + k));

  // A budget of characters the first read's events fill only in part: each read takes one more
  // page of older events (read_context_page).
  for (let i = 0; i < 12; i++) {
    const read = await t.request({ method: 'GET', url: `${base}/short/context?maxChars=1000` });
    expect(read.statusCode).toBe(200);
    expect((read.json() as { events: { seq: number }[] }).events.map((event) => event.seq)).toEqual([1, 2, 3]);
  }

  // The events list's first page in either order: a range of seq and a limit of one session's
  // events, as the context's pages (12 of 12 planned for their values before the mend).
  for (const order of ['asc', 'desc']) {
    for (let i = 0; i < 12; i++) {
      const page = await t.request({ method: 'GET', url: `${base}/short/events?order=${order}&pageSize=50` });
      expect(page.statusCode).toBe(200);
      expect((page.json() as { events: { seq: number }[] }).events.map((event) => event.seq)).toEqual(order === 'asc' ? [1, 2, 3] : [3, 2, 1]);
    }
  }

  // Describe reads the session's row by its key (and its user's and space's): one row whatever the
  // session, so its plan for any values is taken from the sixth read on as well.
  for (let i = 0; i < 12; i++) expect((await t.request({ method: 'GET', url: `${base}/short` })).statusCode).toBe(200);

  const { rows } = await sql<{ name: string; generic_plans: string; custom_plans: string }>`
    SELECT name, generic_plans, custom_plans FROM pg_prepared_statements
    WHERE name LIKE 'read_context%' OR name LIKE 'list_events_%' OR name = 'describe_session' ORDER BY name`.execute(t.db);
  // Five runs of each planned for their values (PostgreSQL's rule), then the one plan for the others.
  expect(rows.map((row) => [row.name, Number(row.custom_plans), Number(row.generic_plans)])).toEqual([
    ['describe_session', 5, 7],
    ['list_events_asc', 5, 7],
    ['list_events_desc', 5, 7],
    ['read_context', 5, 32],
    ['read_context_page', 5, 7],
  ]);
});
