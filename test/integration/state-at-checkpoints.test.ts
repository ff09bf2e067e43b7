// State at event N over 100,000 events, with checkpoints (docs/design.md §4.10): the replay starts
// from the greatest checkpoint below N and no statement of it folds more than K events, which
// /metrics counts (state_at_statement_events, a histogram with a bucket at K) — the bound is
// asserted on those counts and on the checkpoints' rows, never on a time. The answers are compared
// with a fold computed here by the service's pure merge (state-delta.ts), not by the SQL under test.
// The history is written by one INSERT … SELECT generate_series (the append path has its own tests):
// merge-patch deltas with nested keys and null deletes, replace deltas that store null, user:/app:/
// temp: keys the session state must not show, and events without a stateDelta.
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/db/schema.js';
import { diffJson } from '../../src/lib/json-diff.js';
import { sweepExpiredSessions } from '../../src/modules/sessions/expiry-sweeper.js';
import { splitByScope } from '../../src/modules/state/scoped-state.js';
import { applyStateDelta } from '../../src/modules/state/state-delta.js';
import { replayStateAtEvent } from '../../src/modules/events/state-history.repository.js';
import { STATE_CHECKPOINT_INTERVAL as K } from '../../src/modules/events/state-history.service.js';
import { insertSession, insertSpace } from '../support/fixtures.js';
import { planNodes, planOf, recordOneStatement } from '../support/query-plans.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const EVENTS = 100_000;
const INITIAL = { seed: true };
let t: TestApp;
let spaceId: string;

/** Event g's actions, built the same way as the SQL below builds them. */
function actionsOf(g: number): JsonObject {
  if (g % 7 === 0) return {};
  if (g % 5 === 0) return { stateDeltaMode: 'replace', stateDelta: { r: { g }, n: null, 'user:u': g } };
  return { stateDelta: { n: g, m: { a: g % 3 === 0 ? null : g, b: g % 11 }, [`k${g % 50}`]: g, 'app:a': g, 'temp:t': g } };
}

async function insertHistory(sessionId: string, events: number): Promise<void> {
  const key = { accountId: t.account.accountId, spaceId, userId: 'u1', sessionId };
  await insertSession(t.db, key);
  await sql`UPDATE sessions SET initial_state = ${JSON.stringify(INITIAL)}::jsonb WHERE account_id = ${key.accountId} AND space_id = ${spaceId} AND session_id = ${sessionId}`.execute(t.db);
  await sql`
    INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, author, content, actions, event_time, payload_hash)
    SELECT ${key.accountId}, ${spaceId}, 'u1', ${sessionId}, g, 'e' || g, 'agent', NULL,
           CASE
             WHEN g % 7 = 0 THEN '{}'::jsonb
             WHEN g % 5 = 0 THEN jsonb_build_object('stateDeltaMode', 'replace',
                                   'stateDelta', jsonb_build_object('r', jsonb_build_object('g', g), 'n', NULL::int, 'user:u', g))
             ELSE jsonb_build_object('stateDelta', jsonb_build_object(
                    'n', g, 'm', jsonb_build_object('a', CASE WHEN g % 3 = 0 THEN NULL ELSE g END, 'b', g % 11),
                    'k' || (g % 50), g, 'app:a', g, 'temp:t', g))
           END,
           now(), '\\x00'::bytea
    FROM generate_series(1, ${events}) AS g
  `.execute(t.db);
  await sql`UPDATE sessions SET event_count = ${events} WHERE account_id = ${key.accountId} AND space_id = ${spaceId} AND session_id = ${sessionId}`.execute(t.db);
}

/** The session-scoped state after each seq in `seqs`, folded here from event 1. */
function foldUpTo(seqs: number[]): Map<number, JsonObject> {
  const wanted = new Set(seqs);
  const last = Math.max(...seqs);
  const states = new Map<number, JsonObject>();
  let state: JsonObject = INITIAL;
  for (let g = 1; g <= last; g++) {
    const actions = actionsOf(g);
    if (actions.stateDelta) state = applyStateDelta(state, splitByScope(actions.stateDelta as JsonObject).session, actions.stateDeltaMode === 'replace' ? 'replace' : 'merge-patch');
    if (wanted.has(g)) states.set(g, state);
  }
  return states;
}

interface Folds {
  statements: number;
  /** Statements that folded at most K events (the histogram's bucket le=K). */
  withinK: number;
  events: number;
  checkpointsWritten: number;
}

async function folds(): Promise<Folds> {
  const text = (await t.request({ method: 'GET', url: '/metrics', token: null })).body;
  const value = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return {
    statements: value('state_at_statement_events_count'),
    withinK: value(`state_at_statement_events_bucket\\{le="${K}"\\}`),
    events: value('state_at_statement_events_sum'),
    checkpointsWritten: value('state_checkpoints_written_total'),
  };
}

/** What one request did to the counters. */
async function measured<T>(work: () => Promise<T>): Promise<{ result: T; did: Folds }> {
  const before = await folds();
  const result = await work();
  const after = await folds();
  const did = {
    statements: after.statements - before.statements,
    withinK: after.withinK - before.withinK,
    events: after.events - before.events,
    checkpointsWritten: after.checkpointsWritten - before.checkpointsWritten,
  };
  return { result, did };
}

async function checkpointSeqs(sessionId: string): Promise<number[]> {
  const rows = await t.db
    .selectFrom('state_checkpoints')
    .select('seq')
    .where('account_id', '=', t.account.accountId)
    .where('space_id', '=', spaceId)
    .where('session_id', '=', sessionId)
    .orderBy('seq')
    .execute();
  return rows.map((row) => Number(row.seq));
}

const stateAt = (sessionId: string, seq: number) => t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users/u1/sessions/${sessionId}/state-at/${seq}` });
const multiplesOfK = (upTo: number) => Array.from({ length: Math.floor(upTo / K) }, (_, i) => (i + 1) * K);

beforeAll(async () => {
  t = await createTestApp();
  spaceId = await insertSpace(t.db, t.account.accountId);
  await insertHistory('long', EVENTS);
}, 300_000);
afterAll(async () => t?.close());

describe(`state-at over ${EVENTS} events, with a checkpoint every ${K}`, () => {
  const seqs = [1, K - 1, K, K + 1, 30_000, 54_321, EVENTS - 1, EVENTS];
  let expected: Map<number, JsonObject>;
  beforeAll(() => {
    expected = foldUpTo([...seqs, ...multiplesOfK(EVENTS)]);
  });

  it('the first replay to 30,000 writes the checkpoints it passes, folding at most K events per statement', async () => {
    const { result: res, did } = await measured(() => stateAt('long', 30_000));
    expect(res.statusCode).toBe(200);
    expect(res.json().state).toEqual(expected.get(30_000));
    // The state before event 30,000 is after 29,999: checkpoints 1,000 … 29,000, then 999 events.
    expect(await checkpointSeqs('long')).toEqual(multiplesOfK(29_999));
    expect(did).toEqual({ statements: 30, withinK: 30, events: 29_999, checkpointsWritten: 29 });
  });

  it('a second replay to 30,000 starts from checkpoint 29,000 and writes nothing', async () => {
    const { result: res, did } = await measured(() => stateAt('long', 30_000));
    expect(res.json().state).toEqual(expected.get(30_000));
    expect(did).toEqual({ statements: 1, withinK: 1, events: 999, checkpointsWritten: 0 });
  });

  it('answers the fold at each N; once the checkpoints exist, every answer folds fewer than K events', async () => {
    // The first visit past 30,000 writes the rest of the checkpoints, still K events a statement.
    const first = await measured(() => stateAt('long', EVENTS));
    expect(first.did.withinK).toBe(first.did.statements);
    expect(first.did.checkpointsWritten).toBe(EVENTS / K - 1 - 29);
    expect(await checkpointSeqs('long')).toEqual(multiplesOfK(EVENTS - 1));
    for (const seq of seqs) {
      const { result: res, did } = await measured(() => stateAt('long', seq));
      expect(res.statusCode, `state-at/${seq}: ${res.body}`).toBe(200);
      expect(res.json().state, `state-at/${seq}`).toEqual(expected.get(seq));
      expect(did, `state-at/${seq}`).toEqual({ statements: 1, withinK: 1, events: (seq - 1) % K, checkpointsWritten: 0 });
    }
  });

  it('each checkpoint holds the session-scoped state after its seq', async () => {
    const rows = await t.db
      .selectFrom('state_checkpoints')
      .select(['seq', 'state'])
      .where('account_id', '=', t.account.accountId)
      .where('space_id', '=', spaceId)
      .where('session_id', '=', 'long')
      .orderBy('seq')
      .execute();
    expect(rows).toHaveLength(EVENTS / K - 1);
    for (const row of rows) expect(row.state, `checkpoint ${row.seq}`).toEqual(expected.get(Number(row.seq)));
  });

  it('the answer after the last event (a replace delta) names what it changed, against the fold', async () => {
    const body = (await stateAt('long', EVENTS)).json();
    expect(body.changes).toEqual(diffJson(expected.get(EVENTS - 1) as JsonObject, expected.get(EVENTS) as JsonObject));
    expect(body.changes).toContainEqual({ path: ['n'], kind: 'changed', before: EVENTS - 1, after: null });
    expect(body.sharedDelta).toEqual({ user: { 'user:u': EVENTS }, app: {} });
  });
});

describe('checkpoints and the session lifecycle', () => {
  const SMALL = 2_500;
  beforeAll(async () => {
    await insertHistory('small', SMALL);
    await insertHistory('doomed', SMALL);
    await insertHistory('expiring', SMALL);
  }, 120_000);

  it('the expiry sweeper removes the checkpoints with the session', async () => {
    expect((await stateAt('expiring', SMALL)).statusCode).toBe(200);
    expect(await checkpointSeqs('expiring')).toEqual([1000, 2000]);
    await sql`UPDATE sessions SET expire_time = now() - interval '1 second' WHERE account_id = ${t.account.accountId} AND space_id = ${spaceId} AND session_id = 'expiring'`.execute(t.db);
    expect(await sweepExpiredSessions(t.db, { batchSize: 100 })).toBe(1);
    expect(await checkpointSeqs('expiring')).toEqual([]);
  });

  it('deleting the session removes its checkpoints', async () => {
    expect((await stateAt('doomed', SMALL)).statusCode).toBe(200);
    expect(await checkpointSeqs('doomed')).toEqual([1000, 2000]);
    const deleted = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}/users/u1/sessions/doomed` });
    expect(deleted.statusCode).toBe(204);
    expect(await checkpointSeqs('doomed')).toEqual([]);
  });

  it('export and import carry the events, not the checkpoints; the imported session replays to the same state', async () => {
    expect((await stateAt('small', SMALL)).statusCode).toBe(200);
    const exported = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users/u1/sessions/small/export` });
    expect(exported.statusCode).toBe(200);
    const doc = exported.json();
    expect(JSON.stringify(doc)).not.toContain('checkpoint');
    doc.session.sessionId = 'small-copy';
    const imported = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/sessions/import`, payload: doc });
    expect(imported.statusCode, imported.body).toBe(201);
    expect(await checkpointSeqs('small-copy')).toEqual([]);
    // An imported session replays from {} (its initial state is not exported): the seed is missing.
    const { seed: _seed, ...withoutSeed } = foldUpTo([SMALL]).get(SMALL) as JsonObject;
    const copy = (await stateAt('small-copy', SMALL)).json();
    expect(copy.initialStateKnown).toBe(false);
    expect(copy.state).toEqual(withoutSeed);
    expect(await checkpointSeqs('small-copy')).toEqual([1000, 2000]);
  });
});

// The replay reads its range of events through the primary key. events_by_time had the same four
// leading columns (the eventId key has them too), and the planner, without statistics (a table autovacuum has not analyzed yet),
// costs both alike and took it: its scan passes over every event of the session to find the range
// (state-history.repository.ts, replaySelect).
describe('the plan of the replay', () => {
  it('reads the events of the range through events_pkey, not through an index that passes over the whole session', async () => {
    const key = { accountId: t.account.accountId, spaceId, userId: 'u1', sessionId: 'long' };
    const { result: replayed, statement } = await recordOneStatement(t.database.pool, (db) =>
      replayStateAtEvent(db, key, 77_777, { mode: 'merge-patch', delta: { n: 1 } }),
    );
    expect(replayed?.touchedBefore).toEqual({ n: 77_776 });
    const eventScans = planNodes(await planOf(t.database.pool, statement))
      .filter((node) => node['Relation Name'] === 'events')
      .map((node) => node['Index Name'] ?? node['Node Type']);
    expect(eventScans).toEqual(['events_pkey']);
  });
});
