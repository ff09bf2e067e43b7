// A stateDelta of 5,000 keys over a state of ~900 kB (migrations/0009): the database merges it to
// exactly the state the TypeScript merge gives, through the append and through jsonb_merge_patch
// alone. Its cost is measured by bench/README.md ("Merge of a large delta"), not asserted here.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject, JsonValue } from '../../src/db/schema.js';
import { stateBytes } from '../../src/lib/json-measure.js';
import { applyMergePatch } from '../../src/modules/state/merge-patch.js';
import { splitByScope } from '../../src/modules/state/scoped-state.js';
import { applyStateDelta } from '../../src/modules/state/state-delta.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// A delta of 5,000 keys of every kind is ~120 kB of JSON: past the default delta limit (64 KiB),
// which bounds a delta's bytes, not its keys (bench/neighbours.ts sends 5,000 keys in ~50 kB).
const LIMITS = { stateDeltaBytes: 256 * 1024, eventBytes: 512 * 1024 };

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ limits: LIMITS });
});
afterAll(async () => t.close());

const USER = 'user-1';
const KEYS = 5_000;

/** ~900 kB: 15 values of 60 kB (as bench/neighbours.ts builds it), and 2,000 small keys a delta can hit. */
function largeState(): JsonObject {
  const state: JsonObject = {};
  for (let i = 0; i < 15; i++) state[`big${i}`] = `${i}abcdefghij`.repeat(6_000).slice(0, 60_000);
  for (let k = 0; k < 2_000; k++) state[`k${k}`] = k % 3 === 0 ? { keep: k, drop: 'x', inner: { a: [k] } } : k;
  state.list = [1, 2, 3];
  return state;
}

/**
 * 5,000 keys of every kind the merge tells apart: new keys, scalars over scalars, null over a key
 * (removal) and over no key, objects merging into objects (with nested nulls) and into scalars,
 * arrays replacing whole, a replaced 60 kB value, and user:/temp: keys.
 */
function largeDelta(): JsonObject {
  const delta: JsonObject = {};
  for (let k = 0; k < KEYS - 6; k++) {
    switch (k % 6) {
      case 0: delta[`k${k}`] = { drop: null, added: k, inner: { b: true } }; break;
      case 1: delta[`k${k}`] = null; break;
      case 2: delta[`k${k}`] = [k, null, { x: null }]; break;
      case 3: delta[`k${k + 1}`] = { into: 'scalar', gone: null }; break;
      case 4: delta[`n${k}`] = k % 10; break;
      default: delta[`n${k}`] = null;
    }
  }
  Object.assign(delta, { big3: 'short', big4: null, list: { no: 'longer a list' }, 'user:u1': { a: 1, b: null }, 'temp:t': 1, '': 'empty key' });
  return delta;
}

async function newSession(state: JsonObject): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId }, { state });
  return sessionId;
}

async function stored(sessionId: string) {
  const { rows } = await sql<{ state: JsonObject; bytes: number; user_state: JsonObject }>`
    SELECT s.state, octet_length(s.state::text) AS bytes, u.state AS user_state
    FROM sessions AS s JOIN space_users AS u USING (account_id, space_id, user_id)
    WHERE s.account_id = ${t.account.accountId} AND s.session_id = ${sessionId}`.execute(t.db);
  return rows[0]!;
}

describe('an append whose stateDelta has 5,000 keys, over a ~900 kB state', () => {
  it.each(['merge-patch', 'replace'] as const)('stores exactly the state the TypeScript merge gives (%s)', async (mode) => {
    const state = largeState();
    expect(stateBytes(state)).toBeGreaterThan(900_000);
    const delta = largeDelta();
    expect(Object.keys(delta)).toHaveLength(KEYS);
    const sessionId = await newSession(state);
    const userBefore = (await stored(sessionId)).user_state;

    const res = await t.request({
      method: 'POST',
      url: `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}/events`,
      payload: { author: 'agent', actions: { stateDelta: delta, stateDeltaMode: mode } },
    });
    expect(res.statusCode).toBe(201);

    const parts = splitByScope(delta);
    const expectedSession = applyStateDelta(state, parts.session, mode);
    const expectedUser = applyStateDelta(userBefore, parts.user, mode);
    const after = await stored(sessionId);
    expect(after.state).toEqual(expectedSession);
    expect(after.bytes).toBe(stateBytes(expectedSession));
    expect(after.user_state).toEqual(expectedUser);
    expect(res.json().session.state).toEqual({ ...expectedSession, ...expectedUser });
  });
});

describe('jsonb_merge_patch with a 5,000-key patch over a ~900 kB target', () => {
  it('gives the TypeScript applyMergePatch, at the top and nested', async () => {
    const target = largeState();
    const patch = largeDelta();
    for (const [value, where] of [
      [target, patch],
      [{ nested: target }, { nested: patch }],
      [target, { nested: patch }],
      ['not an object', patch],
    ] as [JsonValue, JsonValue][]) {
      const { rows } = await sql<{ merged: JsonValue }>`SELECT jsonb_merge_patch(${JSON.stringify(value)}::jsonb, ${JSON.stringify(where)}::jsonb) AS merged`.execute(t.db);
      expect(rows[0]!.merged).toEqual(applyMergePatch(value, where));
    }
  });
});
