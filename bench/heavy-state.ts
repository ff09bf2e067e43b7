// An append to a session whose state is large (migration 0020): what the database does when every
// append writes the whole state again, compressed, and answers it. One client, one session, one
// event with a one-key delta per append, the contestants interleaved (support.ts,
// timeInterleaved) so that they meet the same moments of a noisy machine:
//   1. the service (its app in-process, through `inject`), the stored JSON compressed with lz4 as
//      migrated where the server has it;
//   2. the same service on a second database whose columns were set back to pglz: the service on a
//      server without lz4 (PGlite's case), or as it was before 0020;
//   3. the baseline, the least the database can do for such an append: one statement on the
//      minimal schema (minimal-transaction.ts) that applies the delta, inserts the event and
//      answers the new state as text, with the state column compressed by pglz (the default);
//   4. the same statement with the minimal schema's state compressed by lz4;
// The service's appends are expensive requests (their answers are heavy): each takes one of its
// account's expensive slots and is charged its answer's bytes to the account's time share
// (append-batcher.ts), so a client appending heavy states back to back is paced by that share, and
// what Node does with a megabyte of answer is in its time too. The statement alone is not:
//   5. and 6. the service's append statement alone (appendInDatabase, in-process, no HTTP), on a
//      database as migrated: as the service sends it on PostgreSQL, the state limit checked on the
//      text it answers (migration 0021), and as it sends it on Citus, the limit checked inside
//      append_events(), which writes the state out once more (the service before 0021).
//
//   BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npm run bench:heavy-state
//
// Creates and drops its own databases, one per contestant. Environment: BENCH_STATE_KEYS (keys of the state, about
// 176 bytes each as JSON text; default 5,500, 0.97 MB, under the default 1 MiB limit), BENCH_N (timed
// appends of each, default 200), BENCH_WARMUP (untimed, default 20).
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { createAccount } from '../src/modules/accounts/accounts.service.js';
import { eventDocument, foldedDocuments, prepareAppend } from '../src/modules/events/append-plan.js';
import { appendInDatabase } from '../src/modules/events/append.repository.js';
import { createSession } from '../src/modules/sessions/sessions.service.js';
import { MINIMAL_SCHEMA, createMinimalSchema } from './minimal-transaction.js';
import { createBenchDatabase, timeInterleaved } from './support.js';

const STATE_KEYS = Number(process.env.BENCH_STATE_KEYS ?? 5_500);
const N = Number(process.env.BENCH_N ?? 200);
const WARMUP = Number(process.env.BENCH_WARMUP ?? 20);
const RUN = randomBytes(3).toString('hex');
// The state: key_<i> → 160 characters of hex, as a state of notes and ids would be (compressible to a quarter).
const HEAVY_STATE = `(SELECT jsonb_object_agg('key_' || i, repeat(md5(i::text), 5)) FROM generate_series(1, ${STATE_KEYS}) AS i)`;

interface Contestant {
  label: string;
  append(n: number): Promise<void>;
  compression(): Promise<{ method: string; storedBytes: number; textBytes: number }>;
  close(): Promise<void>;
}

/** A fresh database as migrated, with one session whose state is HEAVY_STATE. */
async function heavySession(drops: (() => Promise<void>)[], poolMax: number) {
  const { url, drop } = await createBenchDatabase();
  drops.push(drop);
  const config = loadConfig({ DATABASE_URL: url });
  if (config.database.kind !== 'postgres') throw new Error('unreachable: DATABASE_URL is set');
  const handle = await openDatabase({ ...config.database, poolMax });
  await migrateToLatest(handle.db);
  const account = await createAccount(handle.db, 'bench');
  const key = { accountId: account.accountId, spaceId: account.defaultSpaceId, userId: 'u-1', sessionId: 'heavy' };
  await createSession(handle.db, config.limits, key, { sessionId: key.sessionId }, false);
  // Written directly: the state's size, not the appends that would build it, is the point.
  await handle.pool.query(`UPDATE sessions SET state = ${HEAVY_STATE} WHERE account_id = $1 AND session_id = $2`, [key.accountId, key.sessionId]);
  const storage = () => stateStorage(handle.pool, 'sessions WHERE account_id = $1 AND session_id = $2', [key.accountId, key.sessionId]);
  return { config, handle, account, key, storage };
}

/** The n-th append: one event whose delta sets one key of the heavy state. */
const heavyAppend = (n: number) => ({
  eventId: `e-${RUN}-${n}`,
  author: 'agent',
  content: { role: 'model', parts: [{ text: `turn ${n}` }] },
  actions: { stateDelta: { [`key_${(n % STATE_KEYS) + 1}`]: `turn ${n}` } },
});

/** How the state of the one row `from` selects is stored. */
async function stateStorage(pool: pg.Pool, from: string, parameters: unknown[] = []): Promise<{ method: string; storedBytes: number; textBytes: number }> {
  const { rows } = await pool.query(`SELECT pg_column_compression(state) AS method, pg_column_size(state) AS "storedBytes", octet_length(state::text) AS "textBytes" FROM ${from}`, parameters);
  return rows[0];
}

/** The service on a fresh database, its stored JSON compressed by `method`, appending to one heavy session. */
async function serviceOn(method: 'lz4' | 'pglz', drops: (() => Promise<void>)[]): Promise<Contestant> {
  const { config, handle, account, key, storage } = await heavySession(drops, 4);
  if (method === 'pglz') {
    // Every column migration 0020 set to lz4, back to pglz.
    const { rows } = await handle.pool.query<{ table_name: string; column_name: string }>(
      `SELECT c.relname AS table_name, a.attname AS column_name FROM pg_attribute AS a JOIN pg_class AS c ON c.oid = a.attrelid
       WHERE c.relnamespace = current_schema()::regnamespace AND a.attcompression = 'l'`,
    );
    for (const { table_name, column_name } of rows) await handle.pool.query(`ALTER TABLE ${table_name} ALTER COLUMN ${column_name} SET COMPRESSION pglz`);
    if (rows.length === 0) throw new Error('no column is compressed with lz4: migration 0020 did not run');
  }
  const app = await buildApp({ db: handle.db, limits: { ...config.limits, rateLimitMax: 0 }, pageTokenKey: randomBytes(32), logger: false });
  await app.ready();
  const headers = { authorization: `Bearer ${account.rootCredential.token}` };
  const url = `/v1/spaces/${key.spaceId}/users/${key.userId}/sessions/${key.sessionId}/events`;
  return {
    label: `service, stored JSON ${method}`,
    async append(n) {
      const res = await app.inject({ method: 'POST', url, headers, payload: heavyAppend(n) });
      if (res.statusCode !== 201) throw new Error(`append: ${res.statusCode} ${res.body.slice(0, 300)}`);
    },
    compression: storage,
    async close() {
      await app.close();
      await handle.close();
    },
  };
}

/** The minimal one-statement append on the minimal schema of a fresh database, its state compressed by `method`. */
async function minimalOn(method: 'lz4' | 'pglz', drops: (() => Promise<void>)[]): Promise<Contestant> {
  const { url, drop } = await createBenchDatabase();
  drops.push(drop);
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  await createMinimalSchema(pool, 1, 1);
  if (method === 'lz4') await pool.query(`ALTER TABLE ${MINIMAL_SCHEMA}.sessions ALTER COLUMN state SET COMPRESSION lz4`);
  await pool.query(`UPDATE ${MINIMAL_SCHEMA}.sessions SET state = ${HEAVY_STATE}`);
  const statement = `
    WITH s AS (
      UPDATE ${MINIMAL_SCHEMA}.sessions SET state = state || $1::jsonb, revision = revision + 1, event_count = event_count + 1, update_time = now()
      WHERE space_id = 'space-1' AND user_id = 'user-0' AND session_id = 'session-0'
      RETURNING space_id, user_id, session_id, event_count, state::text AS state),
    e AS (INSERT INTO ${MINIMAL_SCHEMA}.events SELECT space_id, user_id, session_id, event_count, $2, 'agent', $3::jsonb, $1::jsonb FROM s)
    SELECT event_count, state FROM s`;
  return {
    label: `minimal statement, state ${method}`,
    async append(n) {
      const delta = JSON.stringify({ [`key_${(n % STATE_KEYS) + 1}`]: `turn ${n}` });
      const { rows } = await pool.query({ name: 'heavy_minimal', text: statement, values: [delta, `e-${RUN}-${n}`, JSON.stringify({ role: 'model', parts: [{ text: `turn ${n}` }] })] });
      if (rows.length !== 1) throw new Error('minimal append: no session');
    },
    compression: () => stateStorage(pool, `${MINIMAL_SCHEMA}.sessions`),
    close: () => pool.end(),
  };
}

/** The service's append statement alone on a database as migrated; `notCitus` as appendInDatabase takes it. */
async function statementOn(notCitus: boolean, drops: (() => Promise<void>)[]): Promise<Contestant> {
  const { config, handle, key, storage } = await heavySession(drops, 1);
  return {
    label: notCitus ? 'append statement, limit on the answered text' : 'append statement, limit in the function',
    async append(n) {
      const events = foldedDocuments(prepareAppend(heavyAppend(n), config.limits).events.map(eventDocument));
      const session = await appendInDatabase(handle.db, key, events, undefined, config.limits.stateBytes, notCitus);
      if (!session) throw new Error('append statement: no session');
    },
    compression: storage,
    close: () => handle.close(),
  };
}

async function main(): Promise<void> {
  const drops: (() => Promise<void>)[] = [];
  const contestants: Contestant[] = [];
  try {
    contestants.push(
      await serviceOn('lz4', drops),
      await serviceOn('pglz', drops),
      await minimalOn('pglz', drops),
      await minimalOn('lz4', drops),
      await statementOn(true, drops),
      await statementOn(false, drops),
    );
    const admin = new pg.Client({ connectionString: process.env.BENCH_DATABASE_URL });
    await admin.connect();
    const version = (await admin.query('SHOW server_version')).rows[0].server_version as string;
    const lz4 = (await admin.query(`SELECT 'lz4' = ANY (enumvals) AS lz4 FROM pg_settings WHERE name = 'default_toast_compression'`)).rows[0].lz4 as boolean;
    await admin.end();
    if (!lz4) throw new Error('this PostgreSQL has no lz4: migration 0020 changes nothing on it');
    console.log(`Node.js ${process.version}, PostgreSQL ${version}; a state of ${STATE_KEYS} keys; ${N} appends of each (after ${WARMUP}), interleaved, one client`);
    let n = 0;
    const latencies = await timeInterleaved(N, contestants.map((contestant) => () => contestant.append(++n)), WARMUP);
    const table = [];
    for (const [k, contestant] of contestants.entries()) {
      const { method, storedBytes, textBytes } = await contestant.compression();
      const { p50, p99, mean } = latencies[k]!;
      table.push({ run: contestant.label, 'p50 ms': p50.toFixed(2), 'mean ms': mean.toFixed(2), 'p99 ms': p99.toFixed(2), 'state stored as': method, 'stored kB': (storedBytes / 1000).toFixed(0), 'text kB': (textBytes / 1000).toFixed(0) });
    }
    console.table(table);
    const [service, servicePglz, minimal, minimalLz4, measuredOnce, measuredInFunction] = latencies.map((latency) => latency.p50);
    console.log(`service (lz4) ÷ service (pglz), p50:                ${(service! / servicePglz!).toFixed(2)}`);
    console.log(`service (lz4) ÷ minimal statement (pglz), p50:       ${(service! / minimal!).toFixed(2)}`);
    console.log(`service (lz4) ÷ minimal statement (lz4), p50:        ${(service! / minimalLz4!).toFixed(2)}`);
    console.log(`service (pglz) ÷ minimal statement (pglz), p50:      ${(servicePglz! / minimal!).toFixed(2)}`);
    console.log(`append statement, limit on the answered text ÷ in the function, p50: ${(measuredOnce! / measuredInFunction!).toFixed(2)}`);
    console.log(`append statement, limit on the answered text ÷ minimal statement (lz4), p50: ${(measuredOnce! / minimalLz4!).toFixed(2)}`);
  } finally {
    for (const contestant of contestants) await contestant.close();
    for (const drop of drops) await drop();
  }
}

await main();
