// Migration 0021: on PostgreSQL and PGlite the append's statement, not the append function, checks
// the state limit, on the JSON text it answers, so that a changed state is written out once. The
// limit holds as before: for each scope, alone and in a batch, nothing written past it, and a state
// the append does not change is not held against a limit it is already over.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type TestApp, createTestApp } from '../support/test-app.js';

const STATE_LIMIT = 4_096;

let t: TestApp;
let base: string;
beforeAll(async () => {
  // One connection: the prepared statements read below are the ones the appends used.
  t = await createTestApp({ poolMax: 1, limits: { stateBytes: STATE_LIMIT } });
  base = `/v1/spaces/${t.account.defaultSpaceId}/users/u-1/sessions`;
});
afterAll(async () => t.close());

let sessionCounter = 0;
async function newSession(): Promise<string> {
  const sessionId = `s-${++sessionCounter}`;
  expect((await t.request({ method: 'POST', url: base, payload: { sessionId } })).statusCode).toBe(201);
  return sessionId;
}

const append = (sessionId: string, payload: object) => t.request({ method: 'POST', url: `${base}/${sessionId}/events`, payload });

/** Everything an append may change: the session's row and events, its user's and space's states. */
async function snapshot(sessionId: string) {
  const { rows } = await sql<{ session: string; events: string; user_state: string; app_state: string }>`
    SELECT (SELECT row_to_json(s)::text FROM sessions AS s WHERE s.account_id = ${t.account.accountId} AND s.session_id = ${sessionId}) AS session,
           (SELECT count(*)::text FROM events AS e WHERE e.account_id = ${t.account.accountId} AND e.session_id = ${sessionId}) AS events,
           (SELECT u.state::text FROM space_users AS u WHERE u.account_id = ${t.account.accountId} AND u.user_id = 'u-1') AS user_state,
           (SELECT sp.state::text FROM session_spaces AS sp WHERE sp.account_id = ${t.account.accountId} AND sp.space_id = ${t.account.defaultSpaceId}) AS app_state`.execute(t.db);
  return rows[0];
}

/** The size PostgreSQL gives a state: its jsonb text in UTF-8. */
const jsonbTextBytes = async (state: object) =>
  (await sql<{ bytes: number }>`SELECT octet_length(${JSON.stringify(state)}::jsonb::text) AS bytes`.execute(t.db)).rows[0]!.bytes;

describe('the state limit, checked by the append statement on the text it answers', () => {
  for (const scope of ['session', 'user', 'app'] as const) {
    it(`refuses an append whose ${scope} state would pass the limit with 413 naming the scope and the exact size, and writes nothing`, async () => {
      const sessionId = await newSession();
      const key = (name: string) => (scope === 'session' ? name : `${scope}:${name}`);
      expect((await append(sessionId, { author: 'a', actions: { stateDelta: { [key('base')]: 'y'.repeat(STATE_LIMIT - 200) } } })).statusCode).toBe(201);
      const before = await snapshot(sessionId);
      const res = await append(sessionId, { author: 'a', actions: { stateDelta: { [key('more')]: 'é'.repeat(150) } } });
      expect(res.statusCode).toBe(413);
      // The user's and the space's states keep their keys' prefixes as stored.
      const wouldBe = await jsonbTextBytes({ [key('base')]: 'y'.repeat(STATE_LIMIT - 200), [key('more')]: 'é'.repeat(150) });
      expect(res.json().error).toMatchObject({ code: 'LimitExceeded.State', details: { scope, stateBytes: wouldBe, limit: STATE_LIMIT } });
      expect(await snapshot(sessionId)).toEqual(before);
      // The same state within the limit is written, and answered whole.
      const within = await append(sessionId, { author: 'a', actions: { stateDelta: { [key('more')]: 'é'.repeat(10) } } });
      expect(within.statusCode).toBe(201);
      expect(within.json().session.state).toMatchObject({ [key('base')]: 'y'.repeat(STATE_LIMIT - 200), [key('more')]: 'é'.repeat(10) });
      // Cleared again, so that the user's and the space's states do not carry into the next case.
      expect((await append(sessionId, { author: 'a', actions: { stateDelta: { [key('base')]: null, [key('more')]: null } } })).statusCode).toBe(201);
    });
  }

  it('does not hold a state the append leaves alone against a limit it is already over; an append that changes it is refused', async () => {
    const sessionId = await newSession();
    // Over the limit as a lower limit would leave it: written directly.
    await sql`UPDATE sessions SET state = jsonb_build_object('big', repeat('z', ${STATE_LIMIT})) WHERE account_id = ${t.account.accountId} AND session_id = ${sessionId}`.execute(t.db);
    const untouched = await append(sessionId, { author: 'a', content: { role: 'user', parts: [{ text: 'no delta' }] } });
    expect(untouched.statusCode).toBe(201);
    expect(untouched.json().session.state).toEqual({ big: 'z'.repeat(STATE_LIMIT) });
    const before = await snapshot(sessionId);
    const changed = await append(sessionId, { author: 'a', actions: { stateDelta: { small: 1 } } });
    expect(changed.statusCode).toBe(413);
    expect(changed.json().error).toMatchObject({ code: 'LimitExceeded.State', details: { scope: 'session' } });
    expect(await snapshot(sessionId)).toEqual(before);
  });

  it('refuses only the append over the limit among appends sent at once, and writes the others', async () => {
    const sessions = [];
    for (let i = 0; i < 8; i++) sessions.push(await newSession());
    const over = sessions[3]!;
    const before = await snapshot(over);
    const answers = await Promise.all(
      sessions.map((sessionId) =>
        append(sessionId, { author: 'a', actions: { stateDelta: sessionId === over ? { big: 'x'.repeat(STATE_LIMIT) } : { turn: sessionId } } }),
      ),
    );
    expect(answers.map((answer) => answer.statusCode)).toEqual(sessions.map((sessionId) => (sessionId === over ? 413 : 201)));
    expect(answers[3]!.json().error.code).toBe('LimitExceeded.State');
    expect(await snapshot(over)).toEqual(before);
    for (const [i, sessionId] of sessions.entries()) if (sessionId !== over) expect(answers[i]!.json().session.state).toEqual({ turn: sessionId });
  });

  it('sends the appends through the statements that measure the state (append_events_measured, and the whole batch with the same check)', async () => {
    const { rows } = await sql<{ name: string; statement: string }>`SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'append_events%' ORDER BY name`.execute(t.db);
    const byName = new Map(rows.map((row) => [row.name, row.statement]));
    expect(byName.get('append_events_measured')).toContain('state_text_within_limit(');
    expect(byName.has('append_events')).toBe(false);
    // The appends sent at once met in a batch, which the whole call refused (the state over the
    // limit) and append_events_batch() then wrote append by append, checking the limit itself.
    expect(byName.get('append_events_batch_whole')).toContain('state_text_within_limit(');
    expect(byName.get('append_events_batch')).toContain('append_events_batch($1::jsonb, $2, $3)');
  });
});
