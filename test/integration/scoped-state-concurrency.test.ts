import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/db/schema.js';
import { insertSpace } from '../support/fixtures.js';
import { APPEND_MODES } from '../support/append-modes.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// Each append mode gets an app of its own (APPEND_MODES): the helpers below use the current one.
let t: TestApp;

const range = (n: number) => Array.from({ length: n }, (_, i) => i);
const sessionsUrl = (spaceId: string, userId: string) => `/v1/spaces/${spaceId}/users/${userId}/sessions`;

async function createSession(spaceId: string, userId: string, sessionId: string): Promise<void> {
  const res = await t.request({ method: 'POST', url: sessionsUrl(spaceId, userId), payload: { sessionId } });
  expect(res.statusCode).toBe(201);
}

async function append(spaceId: string, userId: string, sessionId: string, stateDelta: JsonObject): Promise<void> {
  const res = await t.request({ method: 'POST', url: `${sessionsUrl(spaceId, userId)}/${sessionId}/events`, payload: { author: 'agent', actions: { stateDelta } } });
  // Anything else (a deadlock surfaces as 500, a lock timeout as 503) fails the test here.
  expect(res.statusCode, res.body).toBe(201);
}

async function storedStates(spaceId: string) {
  const accountId = t.account.accountId;
  const sessions = await t.db.selectFrom('sessions').select(['user_id', 'session_id', 'state', 'revision', 'event_count']).where('account_id', '=', accountId).where('space_id', '=', spaceId).execute();
  const users = await t.db.selectFrom('space_users').select(['user_id', 'state']).where('account_id', '=', accountId).where('space_id', '=', spaceId).execute();
  const space = await t.db.selectFrom('session_spaces').select('state').where('account_id', '=', accountId).where('space_id', '=', spaceId).executeTakeFirstOrThrow();
  return {
    session: new Map(sessions.map((row) => [`${row.user_id}/${row.session_id}`, row])),
    user: new Map(users.map((row) => [row.user_id, row.state])),
    app: space.state,
  };
}

describe.each(APPEND_MODES)('$name', (mode) => {
  beforeAll(async () => {
    t = await createTestApp({ poolMax: 12, limits: mode.limits });
  });
  afterAll(async () => t.close());

  describe('concurrent appends to many sessions of one user', () => {
    it('10 sessions × 20 appends, all at once: no user: key is lost, each session keeps its own keys', { timeout: 120_000 }, async () => {
      const SESSIONS = 10;
      const APPENDS = 20;
      const spaceId = await insertSpace(t.db, t.account.accountId);
      const user = `u-${randomUUID().slice(0, 8)}`;
      for (const s of range(SESSIONS)) await createSession(spaceId, user, `s${s}`);

      await Promise.all(
        range(SESSIONS).map(async (s) => {
          for (const i of range(APPENDS)) {
            // A distinct user key per append (a lost update would drop one), a key every session
            // overwrites, and a distinct key of the session itself.
            await append(spaceId, user, `s${s}`, { [`user:k${s}-${i}`]: i, 'user:last': `s${s}-${i}`, [`own${i}`]: s });
          }
        }),
      );

      const stored = await storedStates(spaceId);
      const userState = stored.user.get(user)!;
      for (const s of range(SESSIONS)) for (const i of range(APPENDS)) expect(userState).toHaveProperty(`user:k${s}-${i}`, i);
      expect(Object.keys(userState)).toHaveLength(SESSIONS * APPENDS + 1);
      for (const s of range(SESSIONS)) {
        const session = stored.session.get(`${user}/s${s}`)!;
        expect(session.state).toEqual(Object.fromEntries(range(APPENDS).map((i) => [`own${i}`, s])));
        expect(session.event_count).toBe(APPENDS);
        expect(session.revision).toBe(1 + APPENDS);
      }

      // Every session's view shows the same (whole) user state.
      const view = await t.request({ method: 'GET', url: `${sessionsUrl(spaceId, user)}/s3` });
      expect(view.json().state).toEqual({ ...userState, ...stored.session.get(`${user}/s3`)!.state });
    });
  });

  describe('concurrent appends touching user: and app: keys of two users', () => {
    it('appends, creates and idempotent re-creates across both scopes run at once without deadlock or lost keys', { timeout: 120_000 }, async () => {
      const USERS = ['ada', 'bob'].map((name) => `${name}-${randomUUID().slice(0, 8)}`);
      const SESSIONS = 4;
      const APPENDS = 12;
      const spaceId = await insertSpace(t.db, t.account.accountId);
      for (const user of USERS) for (const s of range(SESSIONS)) await createSession(spaceId, user, `s${s}`);

      const appenders = USERS.flatMap((user, u) =>
        range(SESSIONS).map(async (s) => {
          for (const i of range(APPENDS)) {
            // Alternate which scopes a delta touches: user only, app only, both, and both with a session key.
            const delta: JsonObject =
              i % 4 === 0
                ? { [`user:k${s}-${i}`]: i }
                : i % 4 === 1
                  ? { [`app:k${u}-${s}-${i}`]: i }
                  : { [`app:k${u}-${s}-${i}`]: i, [`user:k${s}-${i}`]: i, 'app:last': `${u}-${s}-${i}`, ...(i % 4 === 3 ? { [`own${i}`]: true } : {}) };
            await append(spaceId, user, `s${s}`, delta);
          }
        }),
      );
      // Meanwhile: new sessions whose initial state writes both scopes, and re-creates of existing
      // sessions (200, which lock the existing row while appends hold it).
      const creators = USERS.map(async (user, u) => {
        for (const n of range(6)) {
          const res = await t.request({
            method: 'POST',
            url: sessionsUrl(spaceId, user),
            payload: { sessionId: `new${n}`, state: { [`user:init${n}`]: n, [`app:init${u}-${n}`]: n, mine: n } },
          });
          expect(res.statusCode, res.body).toBe(201);
          const again = await t.request({ method: 'POST', url: sessionsUrl(spaceId, user), payload: { sessionId: `s${n % SESSIONS}` } });
          expect(again.statusCode, again.body).toBe(200);
        }
      });
      await Promise.all([...appenders, ...creators]);

      const stored = await storedStates(spaceId);
      USERS.forEach((user, u) => {
        const userState = stored.user.get(user)!;
        for (const s of range(SESSIONS)) {
          for (const i of range(APPENDS)) {
            if (i % 4 !== 1) expect(userState).toHaveProperty(`user:k${s}-${i}`, i);
            else expect(stored.app).toHaveProperty(`app:k${u}-${s}-${i}`, i);
            if (i % 4 >= 2) expect(stored.app).toHaveProperty(`app:k${u}-${s}-${i}`, i);
          }
          const session = stored.session.get(`${user}/s${s}`)!;
          expect(session.state).toEqual(Object.fromEntries(range(APPENDS).filter((i) => i % 4 === 3).map((i) => [`own${i}`, true])));
          expect(session.event_count).toBe(APPENDS);
        }
        for (const n of range(6)) {
          expect(userState).toHaveProperty(`user:init${n}`, n);
          expect(stored.app).toHaveProperty(`app:init${u}-${n}`, n);
          expect(stored.session.get(`${user}/new${n}`)!.state).toEqual({ mine: n });
        }
        // No key of one user in the other's state.
        expect(Object.keys(userState)).toHaveLength(SESSIONS * (APPENDS - APPENDS / 4) + 6);
      });
      expect(Object.keys(stored.app)).toHaveLength(USERS.length * SESSIONS * (APPENDS - APPENDS / 4) + USERS.length * 6 + 1);
    });
  });
});
