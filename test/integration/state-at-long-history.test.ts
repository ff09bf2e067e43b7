// State at event N over a history of 100,000 events: the answers are right, and no statement of a
// replay folds more than K events (STATE_CHECKPOINT_INTERVAL), as counted in /metrics — a bound on
// the work, not a time (state-at-checkpoints.test.ts checks the checkpoints themselves). The
// timeline's pages from the start and from near the end are right. The history is written by one
// INSERT … SELECT generate_series (the append path has its own tests); every event sets `n` and
// every 1000th also `k<seq>`, so the state after event N is known.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATE_CHECKPOINT_INTERVAL as K } from '../../src/modules/events/state-history.service.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const EVENTS = 100_000;
let t: TestApp;
let url: string;

beforeAll(async () => {
  t = await createTestApp();
  const spaceId = await insertSpace(t.db, t.account.accountId);
  const key = { accountId: t.account.accountId, spaceId, userId: 'u1', sessionId: 'long' };
  await insertSession(t.db, key);
  await sql`UPDATE sessions SET initial_state = '{"seed": true}', state = '{}' WHERE account_id = ${key.accountId} AND space_id = ${spaceId}`.execute(t.db);
  await sql`
    INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, author, content, actions, event_time, payload_hash)
    SELECT ${key.accountId}, ${spaceId}, 'u1', 'long', g, 'e' || g, CASE WHEN g % 2 = 0 THEN 'agent' ELSE 'user' END,
           jsonb_build_object('parts', jsonb_build_array(jsonb_build_object('text', 'turn ' || g))),
           jsonb_build_object('stateDelta', CASE WHEN g % 1000 = 0 THEN jsonb_build_object('n', g, 'k' || g, true) ELSE jsonb_build_object('n', g) END),
           now(), '\\x00'::bytea
    FROM generate_series(1, ${EVENTS}) AS g
  `.execute(t.db);
  await sql`UPDATE sessions SET event_count = ${EVENTS} WHERE account_id = ${key.accountId} AND space_id = ${spaceId}`.execute(t.db);
  url = `/v1/spaces/${spaceId}/users/u1/sessions/long`;
}, 300_000);
afterAll(async () => t?.close());

const expectedAfter = (seq: number) => {
  const state: Record<string, unknown> = { seed: true, n: seq };
  for (let k = 1000; k <= seq; k += 1000) state[`k${k}`] = true;
  return state;
};

/** The replays' statements so far, and how many of them folded at most K events. */
async function replayStatements(): Promise<{ statements: number; withinK: number }> {
  const text = (await t.request({ method: 'GET', url: '/metrics', token: null })).body;
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return { statements: value('state_at_statement_events_count'), withinK: value(`state_at_statement_events_bucket\\{le="${K}"\\}`) };
}

describe(`a session of ${EVENTS} events`, () => {
  it('answers the state after its first, a middle and its last event, no replay statement folding more than K events', async () => {
    for (const seq of [1, 54_321, EVENTS]) {
      const res = await t.request({ method: 'GET', url: `${url}/state-at/${seq}` });
      expect(res.statusCode).toBe(200);
      expect(res.json().state).toEqual(expectedAfter(seq));
    }
    const { statements, withinK } = await replayStatements();
    // 1: one statement; 54,321: 54 checkpoints and the final fold; 100,000: 45 more and the final fold.
    expect(statements).toBe(1 + 55 + 46);
    expect(withinK).toBe(statements);
    const last = (await t.request({ method: 'GET', url: `${url}/state-at/${EVENTS}` })).json();
    expect(last.changes).toEqual([
      { path: ['n'], kind: 'changed', before: EVENTS - 1, after: EVENTS },
      { path: [`k${EVENTS}`], kind: 'added', after: true },
    ]);
  });

  it('pages the timeline from its first event and from near its last', async () => {
    const first = (await t.request({ method: 'GET', url: `${url}/events?pageSize=50` })).json();
    expect(first.events.map((event: { seq: number }) => event.seq)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    expect(first.nextPageToken).toBeDefined();
    const tail = (await t.request({ method: 'GET', url: `${url}/events?afterSeq=${EVENTS - 10}&pageSize=50` })).json();
    expect(tail.events).toHaveLength(10);
    expect(tail.nextPageToken).toBeUndefined();
  });
});
