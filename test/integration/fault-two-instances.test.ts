// Two service instances against one database, appending concurrently to the same sessions over
// real HTTP: no lost update (every delta key lands, in the session's, the user's and the space's
// state), no duplicate or missing seq, and no deadlock or serialization error reaching a client.
// On PostgreSQL each instance has its own pool, as two processes would; PGlite is one database
// session, so there the two instances share its one-connection pool.
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { APPEND_MODES, type AppendMode } from '../support/append-modes.js';
import { expectedKeys, turnAppend } from '../support/lost-update-workload.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

const POOL_MAX = 5;
const USERS = ['ada', 'bob'];
// PGlite runs every statement on its one connection: a smaller load proves the same there.
const SESSIONS_PER_USER = inject('testBackend').kind === 'postgres' ? 10 : 4;
// Per session: each instance appends this many, both at once.
const APPENDS_PER_INSTANCE = 6;
// Every DUPLICATE_EVERY-th append is sent to both instances at the same moment with the same eventId.
const DUPLICATE_EVERY = 5;

interface Instance {
  name: string;
  app: FastifyInstance;
  baseUrl: string;
  handle: DatabaseHandle;
}

let database: TestDatabase;
let second: DatabaseHandle | undefined;
let instances: Instance[];
let account: CreatedAccount;

beforeAll(async () => {
  database = await createTestDatabase({ poolMax: POOL_MAX });
  if (database.kind === 'postgres') {
    second = await openDatabase({ kind: 'postgres', url: database.pool.options.connectionString!, poolMax: POOL_MAX, statementTimeoutMs: 60_000, connectTimeoutMs: 10_000 });
  }
  account = await createAccount(database.db, `two-instances-${process.pid}`);
});

afterAll(async () => {
  await second?.close();
  await database?.dispose();
});

/** The two instances, each with the append mode's settings. */
async function startInstances(mode: AppendMode): Promise<void> {
  instances = [];
  for (const [name, handle] of [
    ['A', database],
    ['B', second ?? database],
  ] as const) {
    const app = await buildApp({ db: handle.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0, ...mode.limits } });
    await app.listen({ port: 0, host: '127.0.0.1' });
    instances.push({ name, app, handle, baseUrl: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` });
  }
}

interface Sent {
  instance: string;
  status: number;
  body: { events?: { seq: number; eventId: string }[]; error?: { code: string; message: string } };
}

describe.each(APPEND_MODES)('$name', (mode) => {
  beforeAll(async () => startInstances(mode));
  afterAll(async () => {
    for (const instance of instances) await instance.app.close();
  });

  describe('two service instances on one database', () => {
    it('concurrent appends to the same sessions through both: no lost update, seq 1..n, every answer 2xx', { timeout: 60_000 }, async () => {
      const headers = { authorization: `Bearer ${account.rootCredential.token}`, 'content-type': 'application/json' };
      const post = async (instance: Instance, path: string, payload: unknown): Promise<Sent> => {
        const res = await fetch(`${instance.baseUrl}${path}`, { method: 'POST', headers, body: JSON.stringify(payload), signal: AbortSignal.timeout(30_000) });
        return { instance: instance.name, status: res.status, body: (await res.json()) as Sent['body'] };
      };
      const [a, b] = instances as [Instance, Instance];

      const space = await post(a, '/v1/spaces', { name: 'two instances' });
      expect(space.status).toBe(201);
      const spaceId = (space.body as unknown as { spaceId: string }).spaceId;
      const sessions = USERS.flatMap((user) => Array.from({ length: SESSIONS_PER_USER }, (_, s) => ({ user, sessionId: `s${s}` })));
      await Promise.all(
        sessions.map(async ({ user, sessionId }, i) => {
          const created = await post(i % 2 ? a : b, `/v1/spaces/${spaceId}/users/${user}/sessions`, { sessionId });
          expect(created.status).toBe(201);
        }),
      );

      // Each append writes a key of its own into the session, and (two in three) into the user's
      // and the space's state, plus keys every writer overwrites: a lost update drops a key.
      const expected = expectedKeys();
      const results: (Sent & { sessionKey: string; eventId: string; duplicated: boolean })[] = [];
      await Promise.all(
        sessions.flatMap(({ user, sessionId }) =>
          [a, b].map(async (instance) => {
            const sessionKey = `${user}/${sessionId}`;
            const path = `/v1/spaces/${spaceId}/users/${user}/sessions/${sessionId}/events`;
            for (let i = 0; i < APPENDS_PER_INSTANCE; i++) {
              const payload = turnAppend(expected, user, sessionId, instance.name, i);
              const { eventId } = payload;
              const duplicated = i % DUPLICATE_EVERY === DUPLICATE_EVERY - 1;
              // A duplicate goes to both instances at once (a client retrying through another
              // instance before the first answer came back).
              const sent = await Promise.all(duplicated ? [post(instance, path, payload), post(instance === a ? b : a, path, payload)] : [post(instance, path, payload)]);
              for (const one of sent) results.push({ ...one, sessionKey, eventId, duplicated });
            }
          }),
        ),
      );

      // Every answer is 2xx: no deadlock (40P01), serialization failure (40001) or lock timeout
      // reached a client through either instance.
      const failed = results.filter((r) => r.status !== 201 && r.status !== 200);
      expect(failed.map((r) => `${r.instance} ${r.status} ${r.body.error?.code}: ${r.body.error?.message}`)).toEqual([]);
      expect(results.filter((r) => r.instance === 'A').length).toBeGreaterThan(0);
      expect(results.filter((r) => r.instance === 'B').length).toBeGreaterThan(0);

      // A duplicate pair converged on one event: one 201, one 200, the same seq.
      const pairs = groupBy(results.filter((r) => r.duplicated), (r) => `${r.sessionKey}/${r.eventId}`);
      expect(pairs.size).toBe(sessions.length * 2 * Math.floor(APPENDS_PER_INSTANCE / DUPLICATE_EVERY));
      for (const pair of pairs.values()) {
        expect(pair.map((r) => r.status).sort()).toEqual([200, 201]);
        expect(pair[0]!.body.events![0]!.seq).toBe(pair[1]!.body.events![0]!.seq);
      }

      const db = database.db;
      const events = await db.selectFrom('events').select(['user_id', 'session_id', 'seq', 'event_id']).where('account_id', '=', account.accountId).where('space_id', '=', spaceId).orderBy('seq').execute();
      const rows = await db.selectFrom('sessions').select(['user_id', 'session_id', 'event_count', 'revision', 'state']).where('account_id', '=', account.accountId).where('space_id', '=', spaceId).execute();
      const users = await db.selectFrom('space_users').select(['user_id', 'state']).where('account_id', '=', account.accountId).where('space_id', '=', spaceId).execute();
      const spaceRow = await db.selectFrom('session_spaces').select('state').where('account_id', '=', account.accountId).where('space_id', '=', spaceId).executeTakeFirstOrThrow();

      expect(rows).toHaveLength(sessions.length);
      for (const row of rows) {
        const sessionKey = `${row.user_id}/${row.session_id}`;
        const mine = events.filter((e) => e.user_id === row.user_id && e.session_id === row.session_id);
        const appends = 2 * APPENDS_PER_INSTANCE;
        // seq is 1..n without a gap or a repeat, and each eventId is stored once.
        expect(mine.map((e) => e.seq)).toEqual(Array.from({ length: appends }, (_, i) => i + 1));
        expect(new Set(mine.map((e) => e.event_id)).size).toBe(appends);
        // Each acknowledged seq is the stored one.
        for (const r of results.filter((r) => r.sessionKey === sessionKey)) {
          expect(mine.find((e) => e.event_id === r.eventId)?.seq).toBe(r.body.events![0]!.seq);
        }
        expect(row.event_count).toBe(appends);
        // One revision per append that wrote (the replays wrote nothing).
        expect(row.revision).toBe(1 + appends);
        expect(Object.keys(row.state).filter((k) => k.startsWith('own-')).sort()).toEqual([...expected.session.get(sessionKey)!].sort());
      }
      for (const user of USERS) {
        const state = users.find((u) => u.user_id === user)!.state;
        expect(Object.keys(state).filter((k) => k !== 'user:last').sort()).toEqual([...expected.user.get(user)!].sort());
      }
      expect(Object.keys(spaceRow.state).filter((k) => k !== 'app:last').sort()).toEqual([...expected.app].sort());
    });
  });

  function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
    const groups = new Map<string, T[]>();
    for (const item of items) groups.set(key(item), [...(groups.get(key(item)) ?? []), item]);
    return groups;
  }
});
