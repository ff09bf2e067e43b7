// Chooses the backend: PostgreSQL when DATABASE_URL is set, otherwise an embedded PGlite.
// Both are reached through the ordinary `pg` driver and Kysely's PostgresDialect, so every query,
// type parser and error object is the same on both: PGlite is served on a private Unix socket by
// @electric-sql/pglite-socket, and the pool has exactly one connection because PGlite is a single
// database session.
import { rm } from 'node:fs/promises';
import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import pg from 'pg';
import type { PoolStats } from '../lib/metrics-registry.js';
import { parseJson } from '../lib/parse-json.js';
import { type FairCheckouts, defaultPoolPerAccount, fairCheckouts } from './fair-pool.js';
import { type GuardedPool, guardedPool } from './guarded-pool.js';
import { type PgliteThread, startPgliteThread } from './pglite-thread.js';
import { makeSocketDir, socketPathIn } from './socket-dirs.js';
import { timestamptzFromText } from './timestamp-text.js';
import { type Listen, listenOnDedicatedClient, listenOnSinglePool } from './notifications.js';
import type { DB } from './schema.js';

export type Database = Kysely<DB>;
/** What a query runs on: the database, or a transaction when the caller holds one. */
export type Executor = Database | Transaction<DB>;

export type DatabaseOptions =
  | {
      kind: 'postgres';
      url: string;
      /**
       * A direct connection to PostgreSQL, set when `url` goes through a pooler in transaction
       * mode (PgBouncer): see openDatabase.
       */
      directUrl?: string | undefined;
      poolMax: number;
      /** Connections one account's requests may hold at once (fair-pool.ts); default poolMax − 2, at least 1. */
      poolPerAccount?: number | undefined;
      statementTimeoutMs: number;
      connectTimeoutMs: number;
      /** Send the registered per-turn reads as named statements (default true, false behind a pooler; see prepared-statements.ts). */
      preparedStatements?: boolean | undefined;
      /** A pooled connection idle this long is closed (default 10 s, pg's). */
      idleTimeoutMs?: number | undefined;
    }
  | {
      kind: 'pglite';
      dataDir: string | undefined;
      statementTimeoutMs: number;
      /** As on PostgreSQL (default true): PGlite's one session keeps named statements. */
      preparedStatements?: boolean | undefined;
      /** The pool's one connection is closed after this long idle (default 10 s); the next request opens another. */
      idleTimeoutMs?: number | undefined;
      /** A data directory tarball (PGlite's `dumpDataDir()`) to start from instead of an empty cluster; the tests' migrated snapshot. */
      snapshot?: Blob | undefined;
    };

export interface DatabaseHandle {
  /**
   * The database for work of no account: start-up, background jobs, a batch of several accounts'
   * appends. The same database for one account's work, whose checkouts count against the account's
   * share of the pool (fair-pool.ts): accountDatabasesOf(db).
   */
  db: Database;
  kind: DatabaseOptions['kind'];
  pool: pg.Pool;
  /** What the /metrics pool gauges read: the pool's counts, its waiting clients including the checkouts waiting for their account's turn (fair-pool.ts). */
  poolStats: PoolStats;
  /**
   * LISTEN on a channel (see notifications.ts): on PostgreSQL over a dedicated connection of its
   * own, outside the pool; on PGlite over the pool's one connection. Close the subscription before
   * the handle.
   */
  listen: Listen;
  /**
   * Runs `work` where a database session lasts as long as the work: the direct connection when
   * the pool goes through a transaction pooler, the pool otherwise. Migrations run here (Kysely's
   * migrator holds a session-level advisory lock while it applies them).
   */
  onDirectConnection<T>(work: (db: Database) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

export type AccountDatabases = (accountId: string) => Database;

/**
 * The account's handle, kept for the next request: a Kysely instance (about 6.7 KB of heap, tens of
 * microseconds to make) is made once per account rather than per request. At most
 * `ACCOUNT_HANDLES_KEPT` are kept, the least recently used dropped first: a dropped one is simply
 * made again, so more accounts than that at once cost only those microseconds per turn.
 *
 * Why not carry the account in AsyncLocalStorage, as an earlier version did: on Node 20 and 22 it
 * turns on promise hooks for the whole process, and every promise then pays for them: with them gone
 * the server spends about 0.9 × the CPU per append (bench:append-compare, bench/README.md).
 */
function registerAccountDatabases(db: Database, pool: GuardedPool): void {
  const kept = new Map<string, Database>();
  const forAccount: AccountDatabases = (accountId) => {
    let accountDb = kept.get(accountId);
    if (accountDb) {
      kept.delete(accountId);
    } else {
      accountDb = new Kysely<DB>({ dialect: new PostgresDialect({ pool: pool.forAccount(accountId) }) });
      if (kept.size >= ACCOUNT_HANDLES_KEPT) kept.delete(kept.keys().next().value as string);
    }
    kept.set(accountId, accountDb); // most recently used last
    return accountDb;
  };
  accountDatabasesByHandle.set(db, forAccount);
}

const accountDatabasesByHandle = new WeakMap<Database, AccountDatabases>();

/**
 * The database as each account's, for an app given only its `db` (each request's handlers get their
 * account's: http/account-database.ts): what openDatabase registered for it, or, for a Kysely
 * instance opened elsewhere, the instance itself for every account (its checkouts then share no
 * pool by account).
 */
export function accountDatabasesOf(db: Database): AccountDatabases {
  return accountDatabasesByHandle.get(db) ?? (() => db);
}

export const ACCOUNT_HANDLES_KEPT = 1_000;

// int8 columns hold counters and seq numbers far below 2^53: numbers are what the API exposes.
const INT8_OID = 20;
// json and jsonb arrive as text: parsed by parseJson, not pg's bare JSON.parse (lib/parse-json.ts).
const JSON_OID = 114;
const JSONB_OID = 3802;
// timestamptz: its common text form read without pg's regular expressions (timestamp-text.ts).
const TIMESTAMPTZ_OID = 1184;
const pgTimestamptz = pg.types.getTypeParser(TIMESTAMPTZ_OID, 'text');
const readTimestamptz = (text: string) => timestamptzFromText(text, pgTimestamptz);
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === INT8_OID && format !== 'binary') return (value: string) => Number(value);
    if ((oid === JSON_OID || oid === JSONB_OID) && format !== 'binary') return parseJson;
    if (oid === TIMESTAMPTZ_OID && format !== 'binary') return readTimestamptz;
    return pg.types.getTypeParser(oid, format);
  },
} as pg.CustomTypesConfig;

/** Shown in pg_stat_activity, so operators (and the shutdown test) can find the service's connections. */
export const APPLICATION_NAME = 'agent-session-service';
// The server's statement_timeout normally answers first (57014); the client-side timeout is the
// backstop for a server that cannot answer at all.
const QUERY_TIMEOUT_MARGIN_MS = 2_000;
const KEEPALIVE_DELAY_MS = 10_000;
const DEFAULT_IDLE_TIMEOUT_MS = 10_000;
/**
 * The startup `options` of the service's own connections: no idle_session_timeout (PostgreSQL 14+),
 * whatever the server or the role sets. The pool closes its idle connections itself; a server that
 * closed one first (FATAL 57P05, sent before it reads the next statement) turned a healthy
 * database's next request on that connection into a 503, and cut the credential listener, which is
 * idle by design, every period. PGOPTIONS, which this setting would otherwise replace, is kept.
 */
const NO_IDLE_SESSION_TIMEOUT = [process.env.PGOPTIONS, '-c idle_session_timeout=0'].filter(Boolean).join(' ');

function poolStats(pool: pg.Pool, checkouts: FairCheckouts): PoolStats {
  return {
    get totalCount() {
      return pool.totalCount;
    },
    get idleCount() {
      return pool.idleCount;
    },
    get waitingCount() {
      return pool.waitingCount + checkouts.waiting;
    },
    options: pool.options,
  };
}

/**
 * A connection that dies emits 'error' on its client. pg-pool listens only while the client is
 * idle; a client checked out (say, between two statements of a transaction) has no listener, and
 * an unhandled 'error' event would end the process. The listener added here swallows the event:
 * the client is already marked unusable, its pending and next queries fail (503), and the pool
 * discards it on release, so the next request gets a fresh connection.
 */
function keepBrokenClientsFromCrashing(pool: pg.Pool): void {
  pool.on('connect', (client) => client.on('error', () => {}));
  pool.on('error', () => {});
}

/**
 * With `directUrl` set, `url` is taken to be a pooler in transaction mode, where each transaction
 * may run on another server connection and nothing of a session survives it. So there:
 * - LISTEN and the migrations use the direct connection (a listener on a pooled connection would
 *   hear nothing once its LISTEN's transaction ended; the migration lock is session-level);
 * - the pool sends no session settings at connect time (PgBouncer refuses statement_timeout and
 *   idle_in_transaction_session_timeout as startup parameters): set them on the server side for
 *   the service's role, or in the pooler's connect_query (README, Operations);
 * - the per-turn reads go unnamed unless preparedStatements is true (PgBouncer 1.21+ with
 *   max_prepared_statements keeps named statements; 1.18 does not).
 */
export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  if (options.kind === 'postgres') {
    const pooled = options.directUrl !== undefined;
    const sessionSettings = pooled
      ? {}
      : { statement_timeout: options.statementTimeoutMs, idle_in_transaction_session_timeout: options.statementTimeoutMs, options: NO_IDLE_SESSION_TIMEOUT };
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolMax,
      application_name: APPLICATION_NAME,
      // Bounds on every wait, so a database that is down or unreachable fails a request fast
      // (503) instead of holding it: the TCP connect plus startup, each statement on the server,
      // the wait for its answer on the client (a server that stopped answering), and a
      // transaction left open by a client that went away.
      connectionTimeoutMillis: options.connectTimeoutMs,
      ...sessionSettings,
      query_timeout: options.statementTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
      idleTimeoutMillis: options.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
      // Detects a peer that vanished without closing the socket (host down, network cut).
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
      types,
    });
    keepBrokenClientsFromCrashing(pool);
    const namedStatements = options.preparedStatements ?? !pooled;
    // The checkout timeout is the pool's own (connectionTimeoutMillis): the same wait, now per account.
    const checkouts = fairCheckouts({ total: options.poolMax, perAccount: options.poolPerAccount ?? defaultPoolPerAccount(options.poolMax), timeoutMs: options.connectTimeoutMs });
    const guarded = guardedPool(pool, { namedStatements, checkouts });
    const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: guarded }) });
    const directUrl = options.directUrl ?? options.url;
    const listenerClient: pg.ClientConfig = {
      connectionString: directUrl,
      application_name: APPLICATION_NAME,
      connectionTimeoutMillis: options.connectTimeoutMs,
      // Bounds the heartbeat: a server that stopped answering counts as lost.
      query_timeout: options.connectTimeoutMs + QUERY_TIMEOUT_MARGIN_MS,
      options: NO_IDLE_SESSION_TIMEOUT,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_DELAY_MS,
    };
    const listen: Listen = (channel, handlers) => listenOnDedicatedClient(channel, handlers, { client: listenerClient });
    const onDirectConnection = async <T>(work: (db: Database) => Promise<T>): Promise<T> => {
      if (!pooled) return work(db);
      const directPool = new pg.Pool({ connectionString: directUrl, max: 1, application_name: APPLICATION_NAME, connectionTimeoutMillis: options.connectTimeoutMs, types });
      keepBrokenClientsFromCrashing(directPool);
      const direct = new Kysely<DB>({ dialect: new PostgresDialect({ pool: guardedPool(directPool, { namedStatements: false }) }) });
      try {
        return await work(direct);
      } finally {
        await direct.destroy();
      }
    };
    registerAccountDatabases(db, guarded);
    return { db, kind: 'postgres', pool, poolStats: poolStats(pool, checkouts), listen, onDirectConnection, close: () => db.destroy() };
  }
  return openPglite(options);
}

async function openPglite({ dataDir, statementTimeoutMs, snapshot, preparedStatements, idleTimeoutMs }: Extract<DatabaseOptions, { kind: 'pglite' }>): Promise<DatabaseHandle> {
  // A private directory (mode 0700) for the socket: no other local user can reach the database.
  const socketDir = await makeSocketDir();
  let thread: PgliteThread;
  try {
    thread = await startPgliteThread({ dataDir, snapshot, socketPath: socketPathIn(socketDir) });
  } catch (error) {
    await rm(socketDir, { recursive: true, force: true });
    throw error;
  }

  // Every connection lands on the same PGlite session, which keeps what earlier connections left in
  // it (pglite-socket rolls back an open transaction when a connection goes, nothing more): named
  // statements above all, which the new connection's pg client does not know of and would prepare
  // again ("already exists"). So a new connection starts by clearing the session, then listens.
  const pool = new pg.Pool({
    host: socketDir,
    port: 5432,
    user: 'postgres',
    database: 'postgres',
    max: 1,
    idleTimeoutMillis: idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_MS,
    types,
    onConnect: async (client) => {
      await client.query('DEALLOCATE ALL');
      await client.query('UNLISTEN *');
      await client.query(`SET statement_timeout = ${Math.trunc(statementTimeoutMs)}`);
      await listener.onConnect(client); // set below, before any connection opens
    },
  });
  keepBrokenClientsFromCrashing(pool);
  const listener = listenOnSinglePool(pool);
  // One connection: no share can leave a reserve, but the account holding the fewest still goes first.
  const checkouts = fairCheckouts({ total: 1, perAccount: 1, timeoutMs: undefined });
  const guarded = guardedPool(pool, { namedStatements: preparedStatements ?? true, checkouts });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool: guarded }) });
  registerAccountDatabases(db, guarded);
  return {
    db,
    kind: 'pglite',
    pool,
    poolStats: poolStats(pool, checkouts),
    listen: listener.listen,
    onDirectConnection: (work) => work(db),
    async close() {
      await db.destroy();
      await thread.close();
      await rm(socketDir, { recursive: true, force: true });
    },
  };
}
