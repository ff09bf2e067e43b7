// The environment, validated once at start-up. Nothing else reads process.env.
import { availableParallelism } from 'node:os';
import { z } from 'zod';
import type { DatabaseOptions } from './db/connect.js';

const KiB = 1024;
const MiB = 1024 * KiB;

const int = (min: number, fallback: number) => z.coerce.number().int().min(min).default(fallback);

const environmentSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('0.0.0.0'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  // Set when DATABASE_URL goes through a pooler in transaction mode (PgBouncer): migrations and
  // LISTEN need a session of their own and use this direct connection to PostgreSQL instead.
  DATABASE_DIRECT_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  // Shares the per-credential rate limit and the used API 3.0 signatures between instances (ioredis
  // URL, e.g. redis://127.0.0.1:6379).
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  // Prefix of the service's keys in Redis (rate-limit counters, and `tc3-signature:<hex>` for used
  // signatures), so several deployments (or test runs) can share one server.
  REDIS_KEY_PREFIX: z.string().min(1).max(100).default('agent-session-service:rate-limit:'),
  DATA_DIR: z.string().min(1).default('./data'),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  // Unset: readable lines when stdout is a terminal, JSON lines otherwise (a pipe, a file, a container).
  LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  ROOT_API_KEY: z
    .string()
    .regex(/^AKID[A-Za-z0-9]{32}\.[A-Za-z0-9_-]{43,128}$/, 'must be <secretId>.<secretKey>: AKID + 32 base62 characters, a dot, then 43 to 128 base64url characters')
    .optional(),
  // Encrypts the stored copy of each new secret key (AES-256-GCM); without it none is stored.
  CREDENTIAL_MASTER_KEY: z
    .string()
    .refine((value) => /^[A-Za-z0-9+/]+={0,2}$/.test(value) && Buffer.from(value, 'base64').length === 32, 'must be the base64 encoding of exactly 32 bytes (e.g. `openssl rand -base64 32`)')
    .optional(),
  // The Tencent Cloud API 3.0 endpoint answers POST / and, when set, POST on this path too (behind a proxy that routes by path).
  TENCENT_API_PATH: z
    .string()
    .regex(/^\/[A-Za-z0-9._~/-]*[A-Za-z0-9._~-]$/, 'must be a path such as /tc3: a leading slash, no trailing slash, no query')
    .refine((path) => !path.startsWith('/v1') && !['/healthz', '/readyz', '/metrics', '/docs', '/openapi.json'].some((p) => path === p || path.startsWith(`${p}/`)), 'must not overlap /v1, /docs or the health, metrics and OpenAPI paths')
    .optional(),
  // Signs page tokens (HMAC-SHA256). Unset: generated into DATA_DIR in embedded mode, per process with PostgreSQL.
  PAGE_TOKEN_KEY: z
    .string()
    .refine((value) => /^[A-Za-z0-9+/]+={0,2}$/.test(value) && Buffer.from(value, 'base64').length >= 32, 'must be the base64 encoding of at least 32 bytes (e.g. `openssl rand -base64 32`)')
    .optional(),
  // Optional: unset, GET /metrics is open like /healthz (docs/design.md §3); set, a scrape needs it as a bearer token.
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  DB_POOL_MAX: int(1, 10),
  // Pool connections one account's requests may hold at once (src/db/fair-pool.ts); by default two
  // fewer than DB_POOL_MAX (at least 1), kept for the other accounts' turns. At most DB_POOL_MAX.
  DB_POOL_MAX_PER_ACCOUNT: z.coerce.number().int().min(1).optional(),
  DB_STATEMENT_TIMEOUT_MS: int(100, 10_000),
  DB_CONNECT_TIMEOUT_MS: int(100, 5_000),
  // A pooled connection idle this long is closed (the next request opens one); on both backends.
  DB_POOL_IDLE_TIMEOUT_MS: int(100, 10_000),
  // false behind a pooler that cannot keep prepared statements (PgBouncer before 1.21, or without
  // max_prepared_statements in transaction mode): the per-turn reads are then sent unnamed. With
  // DATABASE_DIRECT_URL set (a pooler) the default is false; true opts in (PgBouncer 1.21+). The
  // embedded database honours it too (default true).
  DB_PREPARED_STATEMENTS: z.enum(['true', 'false']).optional(),
  MAX_BODY_BYTES: int(1 * KiB, 1 * MiB),
  MAX_EVENT_BYTES: int(1 * KiB, 256 * KiB),
  MAX_STATE_DELTA_BYTES: int(1, 64 * KiB),
  MAX_STATE_DELTA_DEPTH: int(1, 32),
  MAX_STATE_BYTES: int(1 * KiB, 1 * MiB),
  MAX_BATCH_EVENTS: int(1, 100),
  MAX_TITLE_CHARS: int(1, 256),
  MAX_FILTER_VALUES: int(1, 100),
  MAX_FILTERS: int(1, 10),
  // What one list page may carry: a session list's states (each session's, its user's and its
  // space's), metadata and memo; an event list's events. A page ends before the item that would pass
  // it (the first always comes), with a nextPageToken. Bounds a list's memory whatever pageSize asks
  // (sessions.repository.ts, events.repository.ts).
  MAX_LIST_PAGE_BYTES: int(64 * KiB, 4 * MiB),
  // Session lists that may query at once per instance (the others wait their turn): by default two
  // pool connections fewer than DB_POOL_MAX, so that lists never hold every connection appends need.
  LIST_CONCURRENCY: z.coerce.number().int().min(1).optional(),
  // Of those slots, the most one account may hold at once (default: half, rounded up, and at most
  // half of INSTANCE_CPUS, at least 1), so that one account's expensive requests never hold them
  // all, nor more than half of the instance's cores (src/lib/account-slots.ts, docs/design.md §8).
  EXPENSIVE_PER_ACCOUNT: z.coerce.number().int().min(1).optional(),
  // The cores this instance may use (default: what Node reports, os.availableParallelism()): set it
  // where that is not the share the instance gets (a container's CPU limit Node cannot see).
  INSTANCE_CPUS: z.coerce.number().int().min(1).max(1024).optional(),
  // And the time one account's expensive requests may hold those slots: seconds per second of wall
  // time on an instance, with a burst; one request is charged at most EXPENSIVE_MAX_CHARGE_SECONDS
  // (an export to a slow reader holds its slot long but is not all work). Past it the account's
  // expensive requests wait until the budget refills (src/lib/account-slots.ts, docs/design.md §8).
  EXPENSIVE_SECONDS_PER_SECOND: z.coerce.number().positive().max(1000).default(0.25),
  EXPENSIVE_BURST_SECONDS: z.coerce.number().positive().max(3600).default(2),
  EXPENSIVE_MAX_CHARGE_SECONDS: z.coerce.number().positive().max(3600).default(1),
  // An append whose stateDeltas are larger than this is known to be slow: it does not join a batch,
  // and it takes one of its account's expensive-request slots (docs/design.md §8).
  APPEND_ALONE_DELTA_BYTES: z.coerce.number().int().min(1).default(16 * KiB),
  // Group commit (src/modules/events/append-batcher.ts): appends per database call (1 turns it off;
  // at most 32, see migrations/0007), and append calls in the database at once per instance (by
  // default 2 with PostgreSQL, so that one call waiting for a busy session's lock does not hold up
  // every append; 1 with the embedded database's single connection). bench/README.md has figures.
  APPEND_BATCH_MAX: z.coerce.number().int().min(1).max(32).default(32),
  APPEND_BATCH_CONCURRENCY: z.coerce.number().int().min(1).max(100).optional(),
  // The longest a batch waits, in all, for session rows locked elsewhere (migrations/0008): an append
  // whose session stays locked past it leaves the batch and waits alone, so one locked session holds
  // back only its own appends.
  APPEND_BATCH_LOCK_WAIT_MS: z.coerce.number().int().min(1).max(60_000).default(200),
  RATE_LIMIT_MAX: int(0, 1200),
  RATE_LIMIT_WINDOW_MS: int(1000, 60_000),
  // Slow clients (slowloris): a connection is cut off (408) when its headers, or its whole request
  // with the body, have not arrived in time; an idle keep-alive connection is closed.
  HTTP_HEADERS_TIMEOUT_MS: int(100, 10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(100, 30_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(100, 5_000),
  SWEEP_INTERVAL_MS: int(0, 60_000),
  // The embedded database's autovacuum (src/db/embedded-vacuum.ts): pause between its runs; 0: never.
  EMBEDDED_VACUUM_INTERVAL_MS: int(0, 60_000),
  // Planner statistics where autovacuum has not gathered them (src/db/planner-statistics.ts): pause
  // between the checks; 0: never.
  ANALYZE_INTERVAL_MS: int(0, 5_000),
  // How often the event streams' feed reads the event counts of sessions with open streams; 0: never
  // (streams then see appends through other instances on their heartbeat only).
  EVENT_STREAM_POLL_MS: int(0, 250),
  // Open event streams per account and per instance (429 RequestLimitExceeded past either),
  // and the longest a stream stays open before the server ends it (the client reconnects with
  // Last-Event-ID). Counted per instance: an account may hold its cap on every instance.
  EVENT_STREAM_MAX_PER_ACCOUNT: int(1, 100),
  EVENT_STREAM_MAX_PER_INSTANCE: int(1, 1000),
  EVENT_STREAM_MAX_LIFETIME_MS: int(1000, 30 * 60_000),
  // Verified credentials kept per instance (no database read to authenticate them); 0 turns it off.
  CREDENTIAL_CACHE_SIZE: z.coerce.number().int().min(0).max(1_000_000).default(10_000),
  // Bounded so that one sweep stays one short transaction.
  SWEEP_BATCH_SIZE: z.coerce.number().int().min(1).max(10_000).default(500),
});

export interface Limits {
  bodyBytes: number;
  eventBytes: number;
  stateDeltaBytes: number;
  stateDeltaDepth: number;
  stateBytes: number;
  batchEvents: number;
  titleChars: number;
  filterValues: number;
  filters: number;
  /** Bytes one list page may carry: a session page's states, metadata and memo, an event page's events (the first always comes). */
  listPageBytes: number;
  /**
   * Expensive requests querying at once per instance (bench/list-contention.ts): session lists,
   * state at event N, export and import, appends with a large delta.
   */
  listConcurrency: number;
  /** Of those, the most one account may run at once. */
  expensivePerAccount: number;
  /**
   * Exports open at once per account (half of listConcurrency, rounded up; as many per instance
   * as listConcurrency), each from its first read to its last byte: what bounds the streams and
   * buffers one account's exports hold. Their database reads take expensive slots besides, one
   * read at a time, so an export to a slow reader does not hold its account's expensive share.
   */
  exportsPerAccount: number;
  /** The time one account's expensive requests may hold slots: seconds per second, burst, most charged per request. */
  expensiveTimeShare: { perSecond: number; burstSeconds: number; maxChargeSeconds: number };
  /** An append whose stateDeltas are larger than this goes alone, in one of those slots. */
  appendAloneDeltaBytes: number;
  /** Appends per database call (group commit, append-batcher.ts); 1 sends each alone. */
  appendBatchMax: number;
  /** Append calls in the database at once per instance. */
  appendBatchConcurrency: number;
  /** The longest a batch waits, in all, for rows locked elsewhere before those appends leave it. */
  appendBatchLockWaitMs: number;
  /** An append queued behind its own session's lock (it left a batch) gives up after this: 503. */
  appendSessionQueueWaitMs: number;
  /** Requests per credential per window (per instance, or across all with Redis); 0 turns rate limiting off. */
  rateLimitMax: number;
  rateLimitWindowMs: number;
  /** Time to receive a request's headers; at most requestTimeoutMs (Node refuses more). */
  headersTimeoutMs: number;
  /** Time to receive a whole request, body included (not the time to answer it). */
  requestTimeoutMs: number;
  /** An idle keep-alive connection is closed after this (Node adds 1 s of grace to the advertised value). */
  keepAliveTimeoutMs: number;
  /** Open event streams per account on this instance. */
  eventStreamsPerAccount: number;
  /** Open event streams on this instance, all accounts together. */
  eventStreamsPerInstance: number;
  /** An event stream is ended (`event: end`, reason StreamLifetimeExceeded) after this long. */
  eventStreamLifetimeMs: number;
}

export interface Config {
  port: number;
  host: string;
  /** The PostgreSQL options are openDatabase's own; embedded mode always has a data directory. */
  database: Extract<DatabaseOptions, { kind: 'postgres' }> | (Omit<Extract<DatabaseOptions, { kind: 'pglite' }>, 'snapshot'> & { dataDir: string });
  logLevel: z.infer<typeof environmentSchema>['LOG_LEVEL'];
  /** LOG_FORMAT, or 'auto' when unset: pretty on a terminal, JSON otherwise (src/lib/logger.ts). */
  logFormat: 'json' | 'pretty' | 'auto';
  rootApiKey: string | undefined;
  /** 32 bytes from CREDENTIAL_MASTER_KEY, or undefined when it is not set. */
  credentialMasterKey: Buffer | undefined;
  /** The bytes of PAGE_TOKEN_KEY, or undefined when it is not set (server.ts then chooses one). */
  pageTokenKey: Buffer | undefined;
  /** TENCENT_API_PATH: a second path of the API 3.0 endpoint, besides `/`. */
  tencentApiPath: string | undefined;
  /** METRICS_TOKEN, or undefined when /metrics is open. */
  metricsToken: string | undefined;
  limits: Limits;
  /** The expired-session sweeper; intervalMs 0 turns it off on this instance. */
  sweeper: { intervalMs: number; batchSize: number };
  /** Pause between the embedded database's vacuum runs (PGlite only); 0 turns them off. */
  embeddedVacuumIntervalMs: number;
  /** Pause between the checks for tables to analyze; 0 turns them off. */
  analyzeIntervalMs: number;
  /** EVENT_STREAM_POLL_MS: the event streams' poll interval (src/db/event-feed.ts). */
  eventStreamPollMs: number;
  /** Most credentials the verified-credential cache holds; 0 turns the cache off. */
  credentialCacheSize: number;
  /** REDIS_URL and the key prefix, or undefined: the rate limit then counts per instance. */
  redis: { url: string; keyPrefix: string } | undefined;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export const DEFAULT_LIMITS: Limits = limitsFrom(environmentSchema.parse({}));

/**
 * One account's expensive requests at once, by default: half of the slots (rounded up), and no
 * more than half of the instance's cores. Expensive requests are CPU work, the service's and
 * PostgreSQL's (megabytes decoded, written, compressed): more of one account's at once than there
 * are cores to spare only makes each slower, for it and for everyone. On 2 cores, one at a time
 * against four let another account's turn p99 fall by a quarter to a half under bench:neighbours
 * attacks 2, 5 and 6, and the attacker itself got 1.6–3 × more of them done within its time
 * share (each finishes sooner, so is charged less wall time): bench/README.md.
 */
export function defaultExpensivePerAccount(listConcurrency: number, cpus: number): number {
  return Math.min(Math.ceil(listConcurrency / 2), Math.max(1, Math.floor(cpus / 2)));
}

function limitsFrom(env: z.infer<typeof environmentSchema>): Limits {
  const listConcurrency = env.LIST_CONCURRENCY ?? Math.max(1, env.DB_POOL_MAX - 2);
  return {
    bodyBytes: env.MAX_BODY_BYTES,
    eventBytes: env.MAX_EVENT_BYTES,
    stateDeltaBytes: env.MAX_STATE_DELTA_BYTES,
    stateDeltaDepth: env.MAX_STATE_DELTA_DEPTH,
    stateBytes: env.MAX_STATE_BYTES,
    batchEvents: env.MAX_BATCH_EVENTS,
    titleChars: env.MAX_TITLE_CHARS,
    filterValues: env.MAX_FILTER_VALUES,
    filters: env.MAX_FILTERS,
    listPageBytes: env.MAX_LIST_PAGE_BYTES,
    listConcurrency,
    expensivePerAccount: Math.min(listConcurrency, env.EXPENSIVE_PER_ACCOUNT ?? defaultExpensivePerAccount(listConcurrency, env.INSTANCE_CPUS ?? availableParallelism())),
    exportsPerAccount: Math.ceil(listConcurrency / 2),
    expensiveTimeShare: { perSecond: env.EXPENSIVE_SECONDS_PER_SECOND, burstSeconds: env.EXPENSIVE_BURST_SECONDS, maxChargeSeconds: env.EXPENSIVE_MAX_CHARGE_SECONDS },
    appendAloneDeltaBytes: env.APPEND_ALONE_DELTA_BYTES,
    appendBatchMax: env.APPEND_BATCH_MAX,
    appendBatchConcurrency: env.APPEND_BATCH_CONCURRENCY ?? (env.DATABASE_URL ? Math.min(2, env.DB_POOL_MAX) : 1),
    appendBatchLockWaitMs: env.APPEND_BATCH_LOCK_WAIT_MS,
    appendSessionQueueWaitMs: env.DB_STATEMENT_TIMEOUT_MS,
    rateLimitMax: env.RATE_LIMIT_MAX,
    rateLimitWindowMs: env.RATE_LIMIT_WINDOW_MS,
    headersTimeoutMs: env.HTTP_HEADERS_TIMEOUT_MS,
    requestTimeoutMs: env.HTTP_REQUEST_TIMEOUT_MS,
    keepAliveTimeoutMs: env.HTTP_KEEP_ALIVE_TIMEOUT_MS,
    eventStreamsPerAccount: env.EVENT_STREAM_MAX_PER_ACCOUNT,
    eventStreamsPerInstance: env.EVENT_STREAM_MAX_PER_INSTANCE,
    eventStreamLifetimeMs: env.EVENT_STREAM_MAX_LIFETIME_MS,
  };
}

/** Parses the environment; a bad value throws a ConfigError naming each variable and its rule. */
export function loadConfig(env: Record<string, string | undefined>): Config {
  // An empty variable counts as unset, as in most shells' and compose files' habits.
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  const parsed = environmentSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`Invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  if (e.DATABASE_DIRECT_URL && !e.DATABASE_URL) {
    throw new ConfigError('Invalid environment:\n  DATABASE_DIRECT_URL: needs DATABASE_URL (the pooled connection) as well');
  }
  if (e.HTTP_HEADERS_TIMEOUT_MS > e.HTTP_REQUEST_TIMEOUT_MS) {
    throw new ConfigError('Invalid environment:\n  HTTP_HEADERS_TIMEOUT_MS: must be at most HTTP_REQUEST_TIMEOUT_MS (the headers are part of the request)');
  }
  const preparedStatements = e.DB_PREPARED_STATEMENTS === undefined ? undefined : e.DB_PREPARED_STATEMENTS === 'true';
  return {
    port: e.PORT,
    host: e.HOST,
    database: e.DATABASE_URL
      ? {
          kind: 'postgres',
          url: e.DATABASE_URL,
          directUrl: e.DATABASE_DIRECT_URL,
          poolMax: e.DB_POOL_MAX,
          poolPerAccount: e.DB_POOL_MAX_PER_ACCOUNT,
          statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS,
          connectTimeoutMs: e.DB_CONNECT_TIMEOUT_MS,
          preparedStatements,
          idleTimeoutMs: e.DB_POOL_IDLE_TIMEOUT_MS,
        }
      : { kind: 'pglite', dataDir: e.DATA_DIR, statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS, preparedStatements, idleTimeoutMs: e.DB_POOL_IDLE_TIMEOUT_MS },
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT ?? 'auto',
    rootApiKey: e.ROOT_API_KEY,
    credentialMasterKey: e.CREDENTIAL_MASTER_KEY ? Buffer.from(e.CREDENTIAL_MASTER_KEY, 'base64') : undefined,
    pageTokenKey: e.PAGE_TOKEN_KEY ? Buffer.from(e.PAGE_TOKEN_KEY, 'base64') : undefined,
    metricsToken: e.METRICS_TOKEN,
    tencentApiPath: e.TENCENT_API_PATH,
    limits: limitsFrom(e),
    sweeper: { intervalMs: e.SWEEP_INTERVAL_MS, batchSize: e.SWEEP_BATCH_SIZE },
    embeddedVacuumIntervalMs: e.EMBEDDED_VACUUM_INTERVAL_MS,
    analyzeIntervalMs: e.ANALYZE_INTERVAL_MS,
    eventStreamPollMs: e.EVENT_STREAM_POLL_MS,
    credentialCacheSize: e.CREDENTIAL_CACHE_SIZE,
    redis: e.REDIS_URL ? { url: e.REDIS_URL, keyPrefix: e.REDIS_KEY_PREFIX } : undefined,
  };
}
