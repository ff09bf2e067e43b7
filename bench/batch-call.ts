// One group-commit call timed alone (issue 24): what the database does for a batch of appends when
// nothing else runs, sent by one client, one call after the other, three ways in turn:
//   1. append_events_batch_whole() (migrations/0014): the call the service sends first, all or
//      nothing, two statements per append;
//   2. append_events_batch() (migrations 0007, 0008): a subtransaction, a lock_timeout and a call of
//      append_events() per append, the call the service sends when the first one refuses its batch;
//   3. the baseline, the least the database can do for as many appends in one commit: the minimal
//      one-statement append (minimal-transaction.ts) once per session, `BEGIN; …; COMMIT` in one
//      round trip, on the minimal schema.
// Each batch holds BENCH_BATCH appends (default 7, what the single-event HTTP run's batches held) of
// distinct random sessions, one event with a one-key delta each, in session key order as the
// service sends them; the events are built by the service's own code (prepareAppend, foldedDocuments). BENCH_EVENTS
// (default 1) events per append weigh what each event of a batch request costs: the baseline then
// inserts as many events per session.
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:batch-call
//
// Creates and drops its own database. Environment: BENCH_BATCH, BENCH_EVENTS, BENCH_N (timed calls of each,
// default 2,000), BENCH_WAL_CALLS (untimed calls of each whose WAL is measured, default 200), BENCH_SESSIONS (default 1,000), BENCH_SYNCHRONOUS_COMMIT=off (the client's commits
// do not wait for the WAL flush: it is the same for all three and, on a slow disk, hides the
// difference between the calls' own work), BENCH_SETUP_SQL (run once the sessions exist, e.g.
// `DROP INDEX sessions_space_by_update`, to weigh what an index or a constraint costs the call),
// BENCH_SETUP_FILE (a file of SQL run after it as one query string, then `VACUUM FULL sessions`:
// a schema change with function bodies, such as a replaced append_events_batch_whole()).
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { compareKeys } from '../src/modules/events/append-batcher.js';
import { eventDocument, foldedDocuments, prepareAppend } from '../src/modules/events/append-plan.js';
import { createSession } from '../src/modules/sessions/sessions.service.js';
import { MINIMAL_SCHEMA, createMinimalSchema } from './minimal-transaction.js';
import { createBenchDatabase, timeInterleaved } from './support.js';

const BATCH = Number(process.env.BENCH_BATCH ?? 7);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 1);
const N = Number(process.env.BENCH_N ?? 2_000);
const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 1_000);
const SESSIONS_PER_USER = 10;
const WAL_CALLS = Number(process.env.BENCH_WAL_CALLS ?? 200);
const RUN = randomBytes(3).toString('hex');

const sessionOf = (i: number) => ({ userId: `user-${Math.floor(i / SESSIONS_PER_USER)}`, sessionId: `session-${i}`, i });

/** BATCH distinct random sessions. */
function randomSessions() {
  const picked = new Set<number>();
  while (picked.size < BATCH) picked.add(Math.floor(Math.random() * SESSIONS));
  return [...picked].map(sessionOf);
}

async function main(): Promise<void> {
  const { name, url, drop } = await createBenchDatabase();
  const config = loadConfig({ DATABASE_URL: url });
  if (config.database.kind !== 'postgres') throw new Error('unreachable: DATABASE_URL is set');
  const { limits } = config;
  const handle = await openDatabase({ ...config.database, poolMax: 4 });
  const client = new pg.Client({ connectionString: url });
  try {
    await migrateToLatest(handle.db);
    await createMinimalSchema(handle.pool, SESSIONS, SESSIONS_PER_USER);
    const account = await createAccount(handle.db, 'bench');
    const user = (userId: string) => ({ accountId: account.accountId, spaceId: account.defaultSpaceId, userId });
    for (let i = 0; i < SESSIONS; i++) {
      const { userId, sessionId } = sessionOf(i);
      await createSession(handle.db, limits, user(userId), { sessionId }, false);
    }
    // BENCH_SETUP_SQL runs after the sessions exist, one statement at a time (VACUUM cannot run in
    // a transaction): weigh an index or a constraint by dropping it.
    for (const statement of (process.env.BENCH_SETUP_SQL ?? '').split(';').filter((text) => text.trim())) await handle.pool.query(statement);
    // BENCH_SETUP_FILE runs after it as one query string, so that it may hold function bodies (a
    // changed append function, a trigger): what a schema change would cost, tried before it is
    // written as a migration. Then the sessions are rewritten, so that a fillfactor it set holds.
    if (process.env.BENCH_SETUP_FILE) {
      await handle.pool.query(readFileSync(process.env.BENCH_SETUP_FILE, 'utf8'));
      await handle.pool.query('VACUUM FULL sessions');
    }
    await handle.pool.query('VACUUM ANALYZE');
    await client.connect();
    if (process.env.BENCH_SYNCHRONOUS_COMMIT === 'off') await client.query('SET synchronous_commit = off');

    let appended = 0;
    const batchJson = () =>
      JSON.stringify(
        randomSessions()
          .map(({ userId, sessionId }) => {
            const event = () => {
              const n = ++appended;
              return { eventId: `e-${RUN}-${n}`, author: 'agent', content: { role: 'model', parts: [{ text: `turn ${n}: the quick brown fox` }] }, actions: { stateDelta: { counter: n } } };
            };
            const body = EVENTS === 1 ? event() : { events: Array.from({ length: EVENTS }, event) };
            return { ...user(userId), sessionId, events: foldedDocuments(prepareAppend(body, limits).events.map(eventDocument)) };
          })
          .sort(compareKeys), // in the order the service sends a batch
      );
    const written = { whole: 0, batch: 0 };
    const callOf = (fn: 'append_events_batch_whole' | 'append_events_batch', counted: keyof typeof written) => {
      const text = `SELECT ordinal, revision, event_count FROM ${fn}($1::jsonb, $2, $3)`;
      return async () => {
        const { rows } = await client.query({ name: fn, text, values: [batchJson(), limits.stateBytes, limits.appendBatchLockWaitMs] });
        if (rows.length !== BATCH) throw new Error(`${fn} wrote ${rows.length} of ${BATCH} appends`);
        written[counted] += rows.length;
      };
    };
    const minimal = async () => {
      const statements = randomSessions().map(
        ({ userId, sessionId, i }) =>
          `WITH s AS (UPDATE ${MINIMAL_SCHEMA}.sessions SET state = state || jsonb_build_object('k', ${i}), revision = revision + 1, event_count = event_count + ${EVENTS}, update_time = now() ` +
          `WHERE space_id = 'space-1' AND user_id = '${userId}' AND session_id = '${sessionId}' RETURNING space_id, user_id, session_id, event_count) ` +
          `INSERT INTO ${MINIMAL_SCHEMA}.events SELECT space_id, user_id, session_id, event_count - ${EVENTS} + g, gen_random_uuid()::text, 'agent', '{"role":"model","parts":[{"text":"the quick brown fox"}]}', jsonb_build_object('k', ${i}) ` +
            `FROM s, generate_series(1, ${EVENTS}) AS g`,
      );
      await client.query(`BEGIN; ${statements.join('; ')}; COMMIT`);
    };
    // Building a batch's JSON happens inside each timed call: the same for 1 and 2, and a fraction of
    // a millisecond (printed below) next to the call.
    const build = await timeInterleaved(N, [async () => void batchJson()], 0);
    const [whole, batch, least] = await timeInterleaved(N, [callOf('append_events_batch_whole', 'whole'), callOf('append_events_batch', 'batch'), minimal], 100);

    // WAL written per append (issue 24: what each append costs the disk and a replica), untimed:
    // WAL_CALLS calls of each in turn, the insert position read before and after on the same
    // connection, nothing else writing to the cluster. A checkpoint starting meanwhile adds full-page
    // images to whichever call touches a page first after it; the pass repeats to show that.
    const walBytes = async (once: () => Promise<void>) => {
      const lsn = async () => (await client.query<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn')).rows[0]!.lsn;
      const before = await lsn();
      for (let i = 0; i < WAL_CALLS; i++) await once();
      const { rows } = await client.query<{ bytes: string }>('SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), $1::pg_lsn) AS bytes', [before]);
      return Number(rows[0]!.bytes) / (WAL_CALLS * BATCH);
    };
    const wal: number[][] = [[], [], []];
    for (let pass = 0; pass < 2; pass++) {
      for (const [k, once] of [callOf('append_events_batch_whole', 'whole'), callOf('append_events_batch', 'batch'), minimal].entries()) wal[k]!.push(await walBytes(once));
    }

    const stored = await handle.pool.query<{ n: string }>('SELECT sum(event_count) / $1 AS n FROM sessions', [EVENTS]);
    console.log(`${name}: ${N} timed calls of each after 100 untimed, ${BATCH} appends per call of ${EVENTS} event${EVENTS === 1 ? '' : 's'} each, one client, ${SESSIONS} sessions, synchronous_commit ${(await client.query('SHOW synchronous_commit')).rows[0].synchronous_commit}`);
    console.table(
      (
        [
          ['append_events_batch_whole() (0014)', whole!],
          ['append_events_batch() (0007, 0008)', batch!],
          [`minimal: ${BATCH} one-statement appends, one commit`, least!],
        ] as const
      ).map(([call, { p50, p99, mean }]) => ({ call, 'p50 ms': p50.toFixed(3), 'p99 ms': p99.toFixed(3), 'mean ms': mean.toFixed(3) })),
    );
    console.log(`building a batch's JSON in Node: p50 ${build[0]!.p50.toFixed(3)} ms (inside 1 and 2)`);
    const walLine = (k: number) => wal[k]!.map((bytes) => bytes.toFixed(0)).join(' / ');
    console.log(`WAL bytes per append (${WAL_CALLS} calls of each, two passes): whole ${walLine(0)}; batch ${walLine(1)}; minimal ${walLine(2)}; whole ÷ minimal ${(Math.min(...wal[0]!) / Math.min(...wal[2]!)).toFixed(2)} (the smaller of each)`);
    console.log(`whole ÷ batch (mean): ${(whole!.mean / batch!.mean).toFixed(2)}; whole ÷ minimal: ${(whole!.mean / least!.mean).toFixed(2)}; batch ÷ minimal: ${(batch!.mean / least!.mean).toFixed(2)}`);
    console.log(`verified: ${written.whole + written.batch} appends answered, ${stored.rows[0]!.n} events counted on the sessions`);
    if (Number(stored.rows[0]!.n) !== written.whole + written.batch) throw new Error('an answered append is missing');
  } finally {
    await client.end().catch(() => {});
    await handle.close();
    await drop();
  }
}

await main();
