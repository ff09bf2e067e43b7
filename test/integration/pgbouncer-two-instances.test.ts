// Two service instances (real processes) through a private PgBouncer in transaction mode: each
// instance's pool is multiplexed onto a few server connections, so nothing of a database session
// may outlive a transaction. Concurrent session creates, appends and replays on shared sessions
// must still give seq 1..n, every acknowledged event exactly once, no lost state key and no 5xx;
// and a credential revoked through one instance is refused by the other, whose cache hears the
// change over its LISTEN on the direct connection (DATABASE_DIRECT_URL), not through the pooler.
//
// PostgreSQL only: PgBouncer pools connections to a PostgreSQL server, and PGlite is one session
// inside the service's own process, reachable through nothing but its private socket.
import { randomBytes } from 'node:crypto';
import { readdir } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { issueCredential } from '../../src/modules/accounts/credentials.js';
import { withDatabase } from '../support/backend.js';
import { expectedKeys, turnAppend } from '../support/lost-update-workload.js';
import { type PrivatePgBouncer, startPrivatePgBouncer } from '../support/private-pgbouncer.js';
import { type ServiceProcess, freePort, killServiceProcess, sleep, startServiceProcess, waitUntilReady } from '../support/service-process.js';

const backend = inject('testBackend');
const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

// Server connections PgBouncer may open for the database; each instance's pool is larger.
const SERVER_CONNECTIONS = 4;
const INSTANCE_POOL = 8;
const USERS = ['ada', 'bob'];
const SESSIONS_PER_USER = 6;
// Creates of each session, sent at once through both instances: one creates it, the others find it.
const CREATES_PER_SESSION = 3;
const APPENDS_PER_INSTANCE = 6;
// Every DUPLICATE_EVERY-th append goes to both instances at the same moment with the same eventId;
// every REPLAY_EVERY-th is sent again, once answered, through the other instance (a client's retry).
const DUPLICATE_EVERY = 5;
const REPLAY_EVERY = 4;
// Far below the credential cache's 60 s TTL: a refusal within it came from the notification.
const REVOCATION_DEADLINE_MS = 10_000;

interface Answer {
  instance: string;
  status: number;
  body: { events?: { seq: number; eventId: string }[]; error?: { code: string; message: string }; [key: string]: unknown };
}

describe.runIf(backend.kind === 'postgres')('two instances through PgBouncer in transaction mode (PostgreSQL)', () => {
  const database = `ass_pgbouncer_${randomBytes(6).toString('hex')}`;
  const adminUrl = backend.kind === 'postgres' ? backend.adminUrl : 'postgres://x/y';
  const directUrl = withDatabase(adminUrl, database);
  const token = issueCredential().token;
  const pooledRole = `${database}_pooled`;
  let admin: pg.Client;
  let bouncer: PrivatePgBouncer;
  const services: ServiceProcess[] = [];

  const call = async (service: ServiceProcess, method: string, path: string, payload?: unknown, credential = token): Promise<Answer> => {
    const res = await fetch(`${service.baseUrl}${path}`, {
      method,
      headers: { authorization: `Bearer ${credential}`, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
      body: payload === undefined ? undefined : JSON.stringify(payload),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    return { instance: service === services[0] ? 'A' : 'B', status: res.status, body: (text ? JSON.parse(text) : {}) as Answer['body'] };
  };

  beforeAll(async () => {
    admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    // Empty: the first instance applies the migrations at start. The pooled connections act as a
    // role that may read and write rows but not create anything (the usual split between the
    // service's role and the owner's): a migration sent through the pooler would fail, so the
    // start succeeds only if the migrations take the direct connection.
    await admin.query(`CREATE DATABASE "${database}"`);
    await admin.query(`CREATE ROLE "${pooledRole}" NOLOGIN`);
    const owner = new pg.Client({ connectionString: directUrl });
    await owner.connect();
    await owner.query(`ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "${pooledRole}"`);
    await owner.end();
    // The service sends no session settings through a pooler: the server connections get them here.
    bouncer = await startPrivatePgBouncer({
      upstream: adminUrl,
      poolSize: SERVER_CONNECTIONS,
      connectQuery: `SET ROLE "${pooledRole}"; SET statement_timeout = 60000; SET idle_in_transaction_session_timeout = 60000`,
    });
    for (const name of ['A', 'B']) {
      const service = startServiceProcess({
        DATABASE_URL: bouncer.url(database),
        DATABASE_DIRECT_URL: directUrl,
        DB_POOL_MAX: String(INSTANCE_POOL),
        ROOT_API_KEY: token,
        PORT: String(await freePort()),
        LOG_LEVEL: 'warn',
        RATE_LIMIT_MAX: '0',
        SWEEP_INTERVAL_MS: '0',
      });
      services.push(service);
      // One after the other: the first start creates the pinned root credential's account.
      await waitUntilReady(service);
      expect(service.alive(), name).toBe(true);
    }
  }, 120_000);

  afterAll(async () => {
    for (const service of services) service.child.kill('SIGTERM');
    const deadline = sleep(15_000).then(() => services.forEach(killServiceProcess));
    await Promise.race([Promise.all(services.map((service) => service.exited)), deadline]);
    await bouncer?.remove();
    await admin?.query(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`);
    await admin?.query(`DROP ROLE IF EXISTS "${pooledRole}"`);
    await admin?.end();
  }, 60_000);

  it('migrated over the direct connection: every migration applied, none left holding a lock', async () => {
    const direct = new pg.Client({ connectionString: directUrl });
    await direct.connect();
    try {
      const applied = (await direct.query<{ name: string }>('SELECT name FROM kysely_migration ORDER BY name')).rows.map((row) => row.name);
      const files = (await readdir(MIGRATIONS_DIR)).filter((file) => file.endsWith('.sql')).map((file) => file.replace(/\.sql$/, '')).sort();
      expect(applied).toEqual(files);
      // Kysely's migration lock is session-level, released with its session (the direct one).
      const locks = await direct.query<{ n: string }>(`SELECT count(*) AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE l.locktype = 'advisory' AND d.datname = $1`, [database]);
      expect(Number(locks.rows[0]!.n)).toBe(0);
      // The pooled connections really are the restricted role (what makes the start a proof).
      const pooled = new pg.Client({ connectionString: bouncer.url(database) });
      await pooled.connect();
      try {
        expect((await pooled.query<{ role: string }>('SELECT current_user AS role')).rows[0]!.role).toBe(pooledRole);
        await expect(pooled.query('CREATE TABLE through_the_pooler (x integer)')).rejects.toThrow(/permission denied/);
      } finally {
        await pooled.end();
      }
    } finally {
      await direct.end();
    }
  });

  it('concurrent creates, appends and replays on shared sessions: seq 1..n, each acknowledged event once, no lost key, no 5xx', { timeout: 120_000 }, async () => {
    const [a, b] = services as [ServiceProcess, ServiceProcess];
    const other = (service: ServiceProcess) => (service === a ? b : a);
    const space = await call(a, 'POST', '/v1/spaces', { name: 'through pgbouncer' });
    expect(space.status, JSON.stringify(space.body)).toBe(201);
    const spaceId = space.body.spaceId as string;
    const sessions = USERS.flatMap((user) => Array.from({ length: SESSIONS_PER_USER }, (_, s) => ({ user, sessionId: `s${s}` })));

    // Every session is created by several requests at once, through both instances.
    const creates = await Promise.all(
      sessions.flatMap(({ user, sessionId }) =>
        Array.from({ length: CREATES_PER_SESSION }, (_, i) => call(i % 2 ? b : a, 'POST', `/v1/spaces/${spaceId}/users/${user}/sessions`, { sessionId }).then((answer) => ({ ...answer, sessionId, user }))),
      ),
    );
    expect(creates.filter((r) => r.status !== 200 && r.status !== 201).map((r) => `${r.instance} ${r.status} ${r.body.error?.code}`)).toEqual([]);
    for (const { user, sessionId } of sessions) {
      const mine = creates.filter((r) => r.user === user && r.sessionId === sessionId);
      expect(mine.map((r) => r.status).sort()).toEqual([200, 200, 201].slice(3 - CREATES_PER_SESSION));
    }

    const expected = expectedKeys();
    const results: (Answer & { sessionKey: string; eventId: string; kind: 'single' | 'duplicate' | 'replay' })[] = [];
    await Promise.all(
      sessions.flatMap(({ user, sessionId }) =>
        [a, b].map(async (service) => {
          const sessionKey = `${user}/${sessionId}`;
          const path = `/v1/spaces/${spaceId}/users/${user}/sessions/${sessionId}/events`;
          for (let i = 0; i < APPENDS_PER_INSTANCE; i++) {
            const payload = turnAppend(expected, user, sessionId, service === a ? 'A' : 'B', i);
            const { eventId } = payload;
            if (i % DUPLICATE_EVERY === DUPLICATE_EVERY - 1) {
              const both = await Promise.all([call(service, 'POST', path, payload), call(other(service), 'POST', path, payload)]);
              for (const one of both) results.push({ ...one, sessionKey, eventId, kind: 'duplicate' });
              continue;
            }
            results.push({ ...(await call(service, 'POST', path, payload)), sessionKey, eventId, kind: 'single' });
            if (i % REPLAY_EVERY === REPLAY_EVERY - 1) results.push({ ...(await call(other(service), 'POST', path, payload)), sessionKey, eventId, kind: 'replay' });
          }
        }),
      ),
    );

    // No 5xx and no other error: every append answered 201 (stored) or 200 (already stored).
    expect(results.filter((r) => r.status !== 201 && r.status !== 200).map((r) => `${r.instance} ${r.status} ${r.body.error?.code}: ${r.body.error?.message}`)).toEqual([]);
    expect(results.filter((r) => r.kind === 'single').every((r) => r.status === 201)).toBe(true);
    expect(results.filter((r) => r.kind === 'replay').every((r) => r.status === 200)).toBe(true);
    // Each eventId got one seq, whichever instance answered and how often it was sent.
    const byEvent = new Map<string, Set<number>>();
    for (const r of results) {
      const key = `${r.sessionKey}/${r.eventId}`;
      byEvent.set(key, (byEvent.get(key) ?? new Set()).add(r.body.events![0]!.seq));
    }
    expect([...byEvent.values()].every((seqs) => seqs.size === 1)).toBe(true);
    const pairs = new Map<string, number[]>();
    for (const r of results.filter((r) => r.kind === 'duplicate')) pairs.set(`${r.sessionKey}/${r.eventId}`, [...(pairs.get(`${r.sessionKey}/${r.eventId}`) ?? []), r.status]);
    for (const statuses of pairs.values()) expect(statuses.sort()).toEqual([200, 201]);

    // The database, read directly.
    const direct = new pg.Client({ connectionString: directUrl });
    await direct.connect();
    try {
      const events = (await direct.query<{ user_id: string; session_id: string; seq: string; event_id: string }>('SELECT user_id, session_id, seq, event_id FROM events WHERE space_id = $1 ORDER BY seq', [spaceId])).rows;
      const rows = (await direct.query<{ user_id: string; session_id: string; event_count: string; state: Record<string, unknown> }>('SELECT user_id, session_id, event_count, state FROM sessions WHERE space_id = $1', [spaceId])).rows;
      const users = (await direct.query<{ user_id: string; state: Record<string, unknown>; session_count: string }>('SELECT user_id, state, session_count FROM space_users WHERE space_id = $1', [spaceId])).rows;
      const spaceState = (await direct.query<{ state: Record<string, unknown> }>('SELECT state FROM session_spaces WHERE space_id = $1', [spaceId])).rows[0]!.state;

      expect(rows).toHaveLength(sessions.length);
      const appends = 2 * APPENDS_PER_INSTANCE;
      for (const row of rows) {
        const sessionKey = `${row.user_id}/${row.session_id}`;
        const mine = events.filter((e) => e.user_id === row.user_id && e.session_id === row.session_id);
        expect(mine.map((e) => Number(e.seq))).toEqual(Array.from({ length: appends }, (_, i) => i + 1));
        expect(new Set(mine.map((e) => e.event_id)).size).toBe(appends);
        // Every acknowledged event is stored once, at the seq it was acknowledged with.
        for (const r of results.filter((r) => r.sessionKey === sessionKey)) {
          expect(mine.filter((e) => e.event_id === r.eventId).map((e) => Number(e.seq))).toEqual([r.body.events![0]!.seq]);
        }
        expect(Number(row.event_count)).toBe(appends);
        expect(Object.keys(row.state).filter((k) => k.startsWith('own-')).sort()).toEqual([...expected.session.get(sessionKey)!].sort());
      }
      for (const user of USERS) {
        const row = users.find((u) => u.user_id === user)!;
        expect(Number(row.session_count)).toBe(SESSIONS_PER_USER);
        expect(Object.keys(row.state).filter((k) => k !== 'user:last').sort()).toEqual([...expected.user.get(user)!].sort());
      }
      expect(Object.keys(spaceState).filter((k) => k !== 'app:last').sort()).toEqual([...expected.app].sort());
    } finally {
      await direct.end();
    }

    // It all went through the pooler, on no more server connections than it allows.
    const servers = (await bouncer.show('SERVERS')).filter((s) => s.database === database);
    expect(servers.length).toBeLessThanOrEqual(SERVER_CONNECTIONS);
    const stats = (await bouncer.show('STATS')).find((s) => s.database === database)!;
    expect(Number(stats.total_xact_count)).toBeGreaterThanOrEqual(results.length);
  });

  it('a credential revoked through one instance is refused by the other (LISTEN over the direct connection)', { timeout: 60_000 }, async () => {
    const [a, b] = services as [ServiceProcess, ServiceProcess];
    const space = await call(a, 'POST', '/v1/spaces', { name: 'revocation' });
    const spaceId = space.body.spaceId as string;
    const subAccount = await call(a, 'POST', '/v1/iam/subaccounts', { name: 'agent' });
    expect(subAccount.status).toBe(201);
    const subAccountId = subAccount.body.subAccountId as string;
    const policy = await call(a, 'PUT', `/v1/iam/subaccounts/${subAccountId}/policy`, { statements: [{ effect: 'allow', actions: ['session:*'], resources: [`space/${spaceId}`] }] });
    expect(policy.status).toBeLessThan(300);
    const issued = await call(a, 'POST', `/v1/iam/subaccounts/${subAccountId}/credentials`);
    expect(issued.status).toBe(201);
    const { secretId, token: agentToken } = issued.body as unknown as { secretId: string; token: string };
    const sessionsPath = `/v1/spaces/${spaceId}/sessions`;

    // Both instances verify it (and keep it in their caches).
    expect((await call(a, 'GET', sessionsPath, undefined, agentToken)).status).toBe(200);
    expect((await call(b, 'GET', sessionsPath, undefined, agentToken)).status).toBe(200);
    expect((await call(b, 'GET', sessionsPath, undefined, agentToken)).status).toBe(200);

    const revoked = await call(a, 'DELETE', `/v1/iam/credentials/${secretId}`);
    expect(revoked.status).toBeLessThan(300);
    const onA = await call(a, 'GET', sessionsPath, undefined, agentToken);
    expect([onA.status, onA.body.error?.code]).toEqual([401, 'AuthFailure']);

    const since = Date.now();
    let onB = await call(b, 'GET', sessionsPath, undefined, agentToken);
    while (onB.status === 200 && Date.now() - since < REVOCATION_DEADLINE_MS) {
      await sleep(20);
      onB = await call(b, 'GET', sessionsPath, undefined, agentToken);
    }
    expect([onB.status, onB.body.error?.code]).toEqual([401, 'AuthFailure']);

  });
});
