// Context read latency against history length (issue 4): a session with 100 events and one with
// 100,000, each read N times through the application (app.inject: auth, validation, the service,
// serialization) and, as a baseline in the same run, the same SQL straight through pg.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:context
//
// Creates and drops its own database. Environment: BENCH_N (reads per case, default 500).
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { DEFAULT_LIMITS } from '../src/config.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { createBenchDatabase, time } from './support.js';

const N = Number(process.env.BENCH_N ?? 500);
const WARMUP = 50;
const SIZES = [100, 100_000] as const;
const USER = 'bench-user';

// ~300 bytes of event JSON per row, alternating user and agent turns, as an append would store it.
const FILL_EVENTS = `
  INSERT INTO events (account_id, space_id, user_id, session_id, seq, event_id, invocation_id, author, content, event_time, create_time, payload_hash)
  SELECT $1, $2, $3, $4, g, 'evt-' || lpad(g::text, 8, '0'), 'inv-' || (g / 2),
         CASE WHEN g % 2 = 1 THEN 'user' ELSE 'agent' END,
         jsonb_build_object('role', CASE WHEN g % 2 = 1 THEN 'user' ELSE 'model' END,
                            'parts', jsonb_build_array(jsonb_build_object('text',
                              'Turn ' || g || ': ' || repeat('the quick brown fox jumps over the lazy dog ', 4)))),
         date_trunc('milliseconds', now()) - make_interval(secs => $5 - g),
         date_trunc('milliseconds', now()) - make_interval(secs => $5 - g),
         sha256(g::text::bytea)
  FROM generate_series(1, $5) AS g`;

// The statements the service runs for the default budget (maxChars 100000, maxEvents 100) with
// these ~300-character events: the session with its shared state, then two keyset pages of events
// (64, then the 36 still allowed by maxEvents), in one REPEATABLE READ read-only transaction.
const SESSION_SQL = `
  SELECT sessions.*, space_users.state AS user_state, session_spaces.state AS app_state
  FROM sessions
  JOIN space_users ON space_users.account_id = sessions.account_id AND space_users.space_id = sessions.space_id AND space_users.user_id = sessions.user_id
  JOIN session_spaces ON session_spaces.account_id = sessions.account_id AND session_spaces.space_id = sessions.space_id
  WHERE sessions.account_id = $1 AND sessions.space_id = $2 AND sessions.user_id = $3 AND sessions.session_id = $4
    AND (sessions.expire_time IS NULL OR sessions.expire_time > now())`;
const EVENTS_SQL = `
  SELECT * FROM events
  WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4 AND seq >= $5 AND seq < $6
  ORDER BY seq DESC LIMIT $7`;

async function main(): Promise<void> {
  const { name, url, drop } = await createBenchDatabase();
  const handle = await openDatabase({ kind: 'postgres', url, poolMax: 4, statementTimeoutMs: 600_000, connectTimeoutMs: 10_000 });
  const raw = new pg.Pool({ connectionString: url, max: 1 });
  try {
    await migrateToLatest(handle.db);
    const account = await createAccount(handle.db, 'bench');
    const app = await buildApp({ db: handle.db, pool: handle.pool, limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 } });
    await app.ready();
    const spaceId = account.defaultSpaceId;
    const headers = { authorization: `Bearer ${account.rootCredential.token}` };

    console.log(`PostgreSQL ${(await raw.query('SHOW server_version')).rows[0].server_version}, database ${name}, N=${N} reads per case (after ${WARMUP} warm-up reads)`);
    const results: Record<string, string>[] = [];
    for (const size of SIZES) {
      const sessionId = `bench-${size}`;
      const created = await app.inject({ method: 'POST', url: `/v1/spaces/${spaceId}/users/${USER}/sessions`, headers, payload: { sessionId } });
      if (created.statusCode !== 201) throw new Error(`create session: ${created.statusCode} ${created.body}`);
      const fillStart = performance.now();
      await raw.query(FILL_EVENTS, [account.accountId, spaceId, USER, sessionId, size]);
      await raw.query('UPDATE sessions SET event_count = $5, revision = revision + $5 WHERE account_id = $1 AND space_id = $2 AND user_id = $3 AND session_id = $4', [
        account.accountId,
        spaceId,
        USER,
        sessionId,
        size,
      ]);
      await raw.query('ANALYZE events');
      const avg = (await raw.query('SELECT avg(length(content::text))::int AS avg FROM events WHERE session_id = $1', [sessionId])).rows[0].avg;
      console.log(`session with ${size} events filled in ${((performance.now() - fillStart) / 1000).toFixed(1)} s (content ~${avg} chars/event)`);

      const url = `/v1/spaces/${spaceId}/users/${USER}/sessions/${sessionId}/context`;
      const check = await app.inject({ method: 'GET', url, headers });
      const body = check.json();
      if (check.statusCode !== 200 || body.events.length !== 100 || body.window.endSeq !== size) throw new Error(`context: ${check.statusCode} ${check.body.slice(0, 300)}`);
      console.log(`  one read: ${body.events.length} events, ${check.body.length} bytes, window ${JSON.stringify(body.window)}`);

      const api = await time(N, async () => {
        const res = await app.inject({ method: 'GET', url, headers });
        if (res.statusCode !== 200) throw new Error(`context: ${res.statusCode}`);
      });
      // The fixed cost of any authenticated request (auth, routing, one session read), for scale.
      const describe = await time(N, async () => {
        const res = await app.inject({ method: 'GET', url: url.replace(/\/context$/, ''), headers });
        if (res.statusCode !== 200) throw new Error(`describe: ${res.statusCode}`);
      });
      const args = [account.accountId, spaceId, USER, sessionId];
      const client = await raw.connect();
      const direct = await time(N, async () => {
        await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
        await client.query(SESSION_SQL, args);
        const first = await client.query(EVENTS_SQL, [...args, 1, size + 1, 64]);
        await client.query(EVENTS_SQL, [...args, 1, first.rows.at(-1).seq, 36]);
        await client.query('COMMIT');
      });
      if (size === SIZES.at(-1)) {
        const plan = await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${EVENTS_SQL}`, [...args, 1, size + 1, 64]);
        console.log(`  plan of the events page:\n${plan.rows.map((row) => `    ${row['QUERY PLAN']}`).join('\n')}`);
      }
      client.release();
      const ms = (value: number) => value.toFixed(2);
      results.push({ events: String(size), path: 'GET …/context (app.inject)', p50: ms(api.p50), p99: ms(api.p99), mean: ms(api.mean) });
      results.push({ events: String(size), path: 'GET …/sessions/{id} (reference)', p50: ms(describe.p50), p99: ms(describe.p99), mean: ms(describe.mean) });
      results.push({ events: String(size), path: 'same SQL via pg', p50: ms(direct.p50), p99: ms(direct.p99), mean: ms(direct.mean) });
    }
    console.log('\nlatency in ms');
    console.table(results);
    await app.close();
  } finally {
    await raw.end();
    await handle.close();
    await drop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
