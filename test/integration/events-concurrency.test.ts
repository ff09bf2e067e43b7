import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/db/schema.js';
import { applyMergePatch } from '../../src/modules/state/merge-patch.js';
import { insertSession } from '../support/fixtures.js';
import { APPEND_MODES } from '../support/append-modes.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// Each append mode gets an app of its own (APPEND_MODES): the helpers below use the current one.
let t: TestApp;

const USER = 'concurrent-user';

async function newSession(state: JsonObject): Promise<{ sessionId: string; url: string }> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId }, { state });
  return { sessionId, url: `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}/events` };
}

const range = (n: number) => Array.from({ length: n }, (_, i) => i);

describe.each(APPEND_MODES)('$name', (mode) => {
  beforeAll(async () => {
    t = await createTestApp({ poolMax: 10, limits: mode.limits });
  });
  afterAll(async () => t.close());

  describe('concurrent appends to one session', () => {
    it('50 clients × 20 appends keep every event with seq 1..1000 and every key of every delta', { timeout: 120_000 }, async () => {
      const CLIENTS = 50;
      const APPENDS = 20;
      const initial: JsonObject = { initial: true, perClient: {} };
      const { sessionId, url } = await newSession(initial);
      const before = await t.db.selectFrom('sessions').select('revision').where('session_id', '=', sessionId).executeTakeFirstOrThrow();

      await Promise.all(
        range(CLIENTS).map(async (client) => {
          for (const i of range(APPENDS)) {
            // A distinct key per event, plus keys every client overwrites: their final values depend on the order.
            const stateDelta = { [`k-${client}-${i}`]: i, last: `${client}-${i}`, perClient: { [`c${client}`]: i } };
            const res = await t.request({ method: 'POST', url, payload: { author: `client-${client}`, actions: { stateDelta } } });
            expect(res.statusCode).toBe(201);
            expect(res.json().session.eventCount).toBe(res.json().events[0].seq);
          }
        }),
      );

      const session = await t.db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      const events = await t.db.selectFrom('events').select(['seq', 'author', 'actions']).where('session_id', '=', sessionId).orderBy('seq').execute();
      const total = CLIENTS * APPENDS;
      expect(events.map((e) => e.seq)).toEqual(range(total).map((i) => i + 1));
      expect(session.event_count).toBe(total);
      expect(session.revision).toBe(before.revision + total);

      for (const client of range(CLIENTS)) {
        for (const i of range(APPENDS)) expect(session.state).toHaveProperty(`k-${client}-${i}`, i);
        expect(session.state.perClient).toHaveProperty(`c${client}`, APPENDS - 1);
        // Each client appended sequentially, so its own events are in its own order.
        const own = events
          .filter((e) => e.author === `client-${client}`)
          .map((e) => Object.keys((e.actions as { stateDelta: JsonObject }).stateDelta).find((key) => key.startsWith('k-')));
        expect(own).toEqual(range(APPENDS).map((i) => `k-${client}-${i}`));
      }

      // Every append saw the state the previous one left: folding the deltas in seq order gives the stored state.
      const folded = events.reduce<JsonObject>((state, e) => applyMergePatch(state, (e.actions as { stateDelta: JsonObject }).stateDelta) as JsonObject, initial);
      expect(session.state).toEqual(folded);
      expect(session.state.last).toBe((events.at(-1)!.actions as { stateDelta: JsonObject }).stateDelta.last);
    });

    it('20 concurrent retries of one eventId write it once: one 201, the rest 200 with the same event', async () => {
      const { sessionId, url } = await newSession({ hits: 0 });
      const event = { eventId: 'retried', author: 'user', actions: { stateDelta: { hits: 1, seen: ['once'] } } };
      const responses = await Promise.all(range(20).map(() => t.request({ method: 'POST', url, payload: event })));
      expect(responses.map((r) => r.statusCode).sort((a, b) => a - b)).toEqual([...range(19).map(() => 200), 201]);
      const stored = responses.map((r) => r.json().events[0]);
      for (const e of stored) expect(e).toEqual(stored[0]);

      const session = await t.db.selectFrom('sessions').selectAll().where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(session.event_count).toBe(1);
      expect(session.state).toEqual({ hits: 1, seen: ['once'] });
      const count = await t.db.selectFrom('events').select((eb) => eb.fn.countAll<number>().as('n')).where('session_id', '=', sessionId).executeTakeFirstOrThrow();
      expect(Number(count.n)).toBe(1);
    });
  });
});
