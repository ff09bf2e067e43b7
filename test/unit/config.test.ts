import { availableParallelism } from 'node:os';
import { describe, expect, it } from 'vitest';
import { ConfigError, DEFAULT_LIMITS, defaultExpensivePerAccount, loadConfig } from '../../src/config.js';
import { defaultPoolPerAccount } from '../../src/db/fair-pool.js';

const VALID_KEY = `AKID${'a'.repeat(32)}.${'b'.repeat(43)}`;

/** The ConfigError thrown for `env`, so each test can look at its message. */
function configErrorFor(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error;
    throw error;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be rejected`);
}

describe('loadConfig', () => {
  it('falls back to the documented defaults on an empty environment', () => {
    const config = loadConfig({});
    expect(config).toEqual({
      port: 8080,
      host: '0.0.0.0',
      database: { kind: 'pglite', dataDir: './data', statementTimeoutMs: 10_000, idleTimeoutMs: 10_000 },
      logLevel: 'info',
      logFormat: 'auto',
      rootApiKey: undefined,
      limits: DEFAULT_LIMITS,
      sweeper: { intervalMs: 60_000, batchSize: 500 },
      embeddedVacuumIntervalMs: 60_000,
      analyzeIntervalMs: 5_000,
      eventStreamPollMs: 250,
      credentialCacheSize: 10_000,
    });
    expect(DEFAULT_LIMITS).toEqual({
      bodyBytes: 1024 * 1024,
      eventBytes: 256 * 1024,
      stateDeltaBytes: 64 * 1024,
      stateDeltaDepth: 32,
      stateBytes: 1024 * 1024,
      batchEvents: 100,
      titleChars: 256,
      filterValues: 100,
      filters: 10,
      listPageBytes: 4 * 1024 * 1024,
      listConcurrency: 8,
      // Half of the 8 list slots, and at most half of this machine's cores.
      expensivePerAccount: Math.min(4, Math.max(1, Math.floor(availableParallelism() / 2))),
      exportsPerAccount: 4,
      expensiveTimeShare: { perSecond: 0.25, burstSeconds: 2, maxChargeSeconds: 1 },
      appendAloneDeltaBytes: 16 * 1024,
      appendBatchMax: 32,
      appendBatchConcurrency: 1,
      appendBatchLockWaitMs: 200,
      appendSessionQueueWaitMs: 10_000,
      rateLimitMax: 1200,
      rateLimitWindowMs: 60_000,
      headersTimeoutMs: 10_000,
      requestTimeoutMs: 30_000,
      keepAliveTimeoutMs: 5_000,
      eventStreamsPerAccount: 100,
      eventStreamsPerInstance: 1000,
      eventStreamLifetimeMs: 30 * 60_000,
    });
  });

  it('takes DATABASE_DIRECT_URL beside DATABASE_URL (a pooler), and refuses it alone', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://app@pgbouncer:6432/sessions', DATABASE_DIRECT_URL: 'postgres://app@db:5432/sessions' });
    expect(config.database).toMatchObject({ kind: 'postgres', url: 'postgres://app@pgbouncer:6432/sessions', directUrl: 'postgres://app@db:5432/sessions' });
    expect(() => loadConfig({ DATABASE_DIRECT_URL: 'postgres://app@db:5432/sessions' })).toThrow(/DATABASE_DIRECT_URL: needs DATABASE_URL/);
    expect(() => loadConfig({ DATABASE_URL: 'postgres://a@b/c', DATABASE_DIRECT_URL: 'mysql://db/sessions' })).toThrow(/DATABASE_DIRECT_URL: must be a postgres:\/\/ or postgresql:\/\/ URL/);
  });

  it('reads the pool idle timeout for both backends and the batches\' lock-wait budget, and names bad values', () => {
    expect(loadConfig({ DB_POOL_IDLE_TIMEOUT_MS: '500' }).database).toMatchObject({ kind: 'pglite', idleTimeoutMs: 500 });
    expect(loadConfig({ DATABASE_URL: 'postgres://a@b/c', DB_POOL_IDLE_TIMEOUT_MS: '500' }).database).toMatchObject({ kind: 'postgres', idleTimeoutMs: 500 });
    expect(loadConfig({ APPEND_BATCH_LOCK_WAIT_MS: '50', DB_STATEMENT_TIMEOUT_MS: '2000' }).limits).toMatchObject({ appendBatchLockWaitMs: 50, appendSessionQueueWaitMs: 2000 });
    expect(() => loadConfig({ DB_POOL_IDLE_TIMEOUT_MS: '10' })).toThrow(/DB_POOL_IDLE_TIMEOUT_MS/);
    expect(() => loadConfig({ APPEND_BATCH_LOCK_WAIT_MS: '0' })).toThrow(/APPEND_BATCH_LOCK_WAIT_MS/);
  });

  it('takes REDIS_URL with a default key prefix, and names a bad one', () => {
    expect(loadConfig({}).redis).toBeUndefined();
    expect(loadConfig({ REDIS_URL: 'redis://127.0.0.1:6379' }).redis).toEqual({ url: 'redis://127.0.0.1:6379', keyPrefix: 'agent-session-service:rate-limit:' });
    expect(loadConfig({ REDIS_URL: 'rediss://cache:6380/2', REDIS_KEY_PREFIX: 'prod:' }).redis).toEqual({ url: 'rediss://cache:6380/2', keyPrefix: 'prod:' });
    expect(() => loadConfig({ REDIS_URL: 'http://cache' })).toThrow(/REDIS_URL: must be a redis:\/\/ or rediss:\/\/ URL/);
  });

  it('chooses PostgreSQL when DATABASE_URL is set, with the pool settings', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://app@db:5432/sessions', DB_POOL_MAX: '4', DB_STATEMENT_TIMEOUT_MS: '2500' });
    expect(config.database).toEqual({
      kind: 'postgres',
      url: 'postgres://app@db:5432/sessions',
      poolMax: 4,
      statementTimeoutMs: 2500,
      connectTimeoutMs: 5_000,
      idleTimeoutMs: 10_000,
    });
    expect(loadConfig({ DATABASE_URL: 'postgresql://app@db/sessions' }).database.kind).toBe('postgres');
  });

  it('turns the named statements of the per-turn reads off with DB_PREPARED_STATEMENTS=false, and refuses other values', () => {
    const url = 'postgres://app@db:5432/sessions';
    expect(loadConfig({ DATABASE_URL: url, DB_PREPARED_STATEMENTS: 'false' }).database).toMatchObject({ preparedStatements: false });
    expect(loadConfig({ DATABASE_URL: url, DB_PREPARED_STATEMENTS: 'true' }).database).toMatchObject({ preparedStatements: true });
    expect(loadConfig({ DATABASE_URL: url }).database).not.toHaveProperty('preparedStatements', false);
    // The embedded database honours it too.
    expect(loadConfig({ DB_PREPARED_STATEMENTS: 'false' }).database).toMatchObject({ kind: 'pglite', preparedStatements: false });
    expect(() => loadConfig({ DATABASE_URL: url, DB_PREPARED_STATEMENTS: 'no' })).toThrow(/DB_PREPARED_STATEMENTS/);
  });

  it('reads every variable it documents', () => {
    const config = loadConfig({
      PORT: '9000',
      HOST: '127.0.0.1',
      DATA_DIR: '/var/lib/sessions',
      LOG_LEVEL: 'debug',
      LOG_FORMAT: 'pretty',
      ROOT_API_KEY: VALID_KEY,
      MAX_BODY_BYTES: '2048',
      MAX_BATCH_EVENTS: '10',
      SWEEP_INTERVAL_MS: '0',
      SWEEP_BATCH_SIZE: '50',
      EMBEDDED_VACUUM_INTERVAL_MS: '5000',
      ANALYZE_INTERVAL_MS: '0',
      CREDENTIAL_CACHE_SIZE: '0',
    });
    expect(config).toMatchObject({
      port: 9000,
      host: '127.0.0.1',
      database: { kind: 'pglite', dataDir: '/var/lib/sessions' },
      logLevel: 'debug',
      logFormat: 'pretty',
      rootApiKey: VALID_KEY,
      limits: { ...DEFAULT_LIMITS, bodyBytes: 2048, batchEvents: 10 },
      sweeper: { intervalMs: 0, batchSize: 50 },
      embeddedVacuumIntervalMs: 5000,
      analyzeIntervalMs: 0,
      credentialCacheSize: 0,
    });
  });

  it('takes LOG_FORMAT json or pretty, leaves the choice to the terminal when unset, and names a bad value', () => {
    expect(loadConfig({ LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(loadConfig({ LOG_FORMAT: '' }).logFormat).toBe('auto');
    expect(configErrorFor({ LOG_FORMAT: 'text' }).message).toBe('Invalid environment:\n  LOG_FORMAT: Invalid option: expected one of "json"|"pretty"');
  });

  it('reads the slow-client timeouts into the limits', () => {
    const { limits } = loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '2000', HTTP_REQUEST_TIMEOUT_MS: '2000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '700' });
    expect(limits).toMatchObject({ headersTimeoutMs: 2000, requestTimeoutMs: 2000, keepAliveTimeoutMs: 700 });
  });

  it('reads the event streams\' caps and lifetime into the limits, and refuses a lifetime under a second', () => {
    const { limits } = loadConfig({ EVENT_STREAM_MAX_PER_ACCOUNT: '5', EVENT_STREAM_MAX_PER_INSTANCE: '50', EVENT_STREAM_MAX_LIFETIME_MS: '60000' });
    expect(limits).toMatchObject({ eventStreamsPerAccount: 5, eventStreamsPerInstance: 50, eventStreamLifetimeMs: 60_000 });
    expect(() => loadConfig({ EVENT_STREAM_MAX_LIFETIME_MS: '999' })).toThrow(/EVENT_STREAM_MAX_LIFETIME_MS/);
    expect(() => loadConfig({ EVENT_STREAM_MAX_PER_ACCOUNT: '0' })).toThrow(/EVENT_STREAM_MAX_PER_ACCOUNT/);
  });

  it('treats an empty variable as unset', () => {
    const config = loadConfig({ PORT: '', DATABASE_URL: '', ROOT_API_KEY: '', LOG_LEVEL: '' });
    expect(config.port).toBe(8080);
    expect(config.database.kind).toBe('pglite');
    expect(config.rootApiKey).toBeUndefined();
    expect(config.logLevel).toBe('info');
  });

  it.each([
    ['PORT', { PORT: 'abc' }],
    ['PORT', { PORT: '70000' }],
    ['PORT', { PORT: '80.5' }],
    ['DATABASE_URL', { DATABASE_URL: 'mysql://x' }],
    ['ROOT_API_KEY', { ROOT_API_KEY: 'not-a-key' }],
    ['ROOT_API_KEY', { ROOT_API_KEY: `AKID${'a'.repeat(31)}.${'b'.repeat(43)}` }],
    ['ROOT_API_KEY', { ROOT_API_KEY: `AKID${'a'.repeat(32)}.${'b'.repeat(42)}` }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
    ['LOG_FORMAT', { LOG_FORMAT: 'JSON' }],
    ['MAX_BODY_BYTES', { MAX_BODY_BYTES: '10' }],
    ['DB_POOL_MAX', { DB_POOL_MAX: '0' }],
    ['SWEEP_INTERVAL_MS', { SWEEP_INTERVAL_MS: '-1' }],
    ['EMBEDDED_VACUUM_INTERVAL_MS', { EMBEDDED_VACUUM_INTERVAL_MS: '-1' }],
    ['ANALYZE_INTERVAL_MS', { ANALYZE_INTERVAL_MS: 'often' }],
    ['SWEEP_BATCH_SIZE', { SWEEP_BATCH_SIZE: '0' }],
    ['SWEEP_BATCH_SIZE', { SWEEP_BATCH_SIZE: '10001' }],
    ['HTTP_HEADERS_TIMEOUT_MS', { HTTP_HEADERS_TIMEOUT_MS: '50' }],
    ['HTTP_REQUEST_TIMEOUT_MS', { HTTP_REQUEST_TIMEOUT_MS: 'soon' }],
    ['HTTP_KEEP_ALIVE_TIMEOUT_MS', { HTTP_KEEP_ALIVE_TIMEOUT_MS: '-1' }],
    // The headers are part of the request: Node refuses a headers timeout longer than the request timeout.
    ['HTTP_HEADERS_TIMEOUT_MS', { HTTP_HEADERS_TIMEOUT_MS: '20000', HTTP_REQUEST_TIMEOUT_MS: '15000' }],
  ])('names %s in the error for %j', (variable, env) => {
    const error = configErrorFor(env);
    expect(error.name).toBe('ConfigError');
    expect(error.message).toContain(`${variable}:`);
  });

  it('lists every bad variable at once, and never echoes a rejected key', () => {
    const secretLooking = 'AKIDshort.this-is-what-the-operator-typed';
    const error = configErrorFor({ PORT: 'abc', DATABASE_URL: 'mysql://x', ROOT_API_KEY: secretLooking });
    expect(error.message).toMatch(/PORT:/);
    expect(error.message).toMatch(/DATABASE_URL:/);
    expect(error.message).toMatch(/ROOT_API_KEY:/);
    expect(error.message).not.toContain(secretLooking);
  });

  it('reads PAGE_TOKEN_KEY as bytes, and refuses one under 32 bytes naming the variable but not the value', () => {
    const key = Buffer.alloc(48, 9).toString('base64');
    expect(loadConfig({ PAGE_TOKEN_KEY: key }).pageTokenKey).toEqual(Buffer.alloc(48, 9));
    expect(loadConfig({}).pageTokenKey).toBeUndefined();
    const short = Buffer.alloc(31, 9).toString('base64');
    for (const bad of [short, 'not base64!', `${key}==x`]) {
      const error = configErrorFor({ PAGE_TOKEN_KEY: bad });
      expect(error.message).toMatch(/PAGE_TOKEN_KEY: must be the base64 encoding of at least 32 bytes/);
      expect(error.message).not.toContain(bad);
    }
  });

  it('passes DB_POOL_MAX_PER_ACCOUNT to the pool (default: DB_POOL_MAX − 2, at least 1, applied by the pool), and refuses 0', () => {
    const pg = 'postgres://localhost/db';
    expect(loadConfig({ DATABASE_URL: pg, DB_POOL_MAX_PER_ACCOUNT: '3' }).database).toMatchObject({ kind: 'postgres', poolMax: 10, poolPerAccount: 3 });
    expect(loadConfig({ DATABASE_URL: pg }).database).toMatchObject({ poolPerAccount: undefined });
    expect([10, 3, 2, 1].map(defaultPoolPerAccount)).toEqual([8, 1, 1, 1]);
    expect(() => loadConfig({ DATABASE_URL: pg, DB_POOL_MAX_PER_ACCOUNT: '0' })).toThrow(/DB_POOL_MAX_PER_ACCOUNT/);
  });

  it('lets session lists use two pool connections fewer than DB_POOL_MAX unless LIST_CONCURRENCY says otherwise', () => {
    expect(loadConfig({ DB_POOL_MAX: '4' }).limits.listConcurrency).toBe(2);
    expect(loadConfig({ DB_POOL_MAX: '1' }).limits.listConcurrency).toBe(1);
    expect(loadConfig({ LIST_CONCURRENCY: '3' }).limits.listConcurrency).toBe(3);
    expect(() => loadConfig({ LIST_CONCURRENCY: '0' })).toThrow(/LIST_CONCURRENCY/);
    // One account may hold half of them (rounded up) and at most half of the instance's cores, or
    // EXPENSIVE_PER_ACCOUNT, never more than all.
    expect(loadConfig({ DB_POOL_MAX: '7', INSTANCE_CPUS: '16' }).limits.expensivePerAccount).toBe(3);
    expect(loadConfig({ DB_POOL_MAX: '7', INSTANCE_CPUS: '4' }).limits.expensivePerAccount).toBe(2);
    expect(loadConfig({ INSTANCE_CPUS: '2' }).limits.expensivePerAccount).toBe(1);
    expect(loadConfig({ INSTANCE_CPUS: '3' }).limits.expensivePerAccount).toBe(1);
    expect(loadConfig({ INSTANCE_CPUS: '1' }).limits.expensivePerAccount).toBe(1);
    expect(loadConfig({ INSTANCE_CPUS: '2', EXPENSIVE_PER_ACCOUNT: '3' }).limits.expensivePerAccount).toBe(3);
    expect(() => loadConfig({ INSTANCE_CPUS: '0' })).toThrow(/INSTANCE_CPUS/);
    expect(loadConfig({}).limits.expensivePerAccount).toBe(defaultExpensivePerAccount(8, availableParallelism()));
    // Exports open at once per account: half of the slots, whatever the cores (they mostly wait for their readers).
    expect(loadConfig({ INSTANCE_CPUS: '2' }).limits.exportsPerAccount).toBe(4);
    expect(loadConfig({ LIST_CONCURRENCY: '3' }).limits.exportsPerAccount).toBe(2);
    expect(loadConfig({ LIST_CONCURRENCY: '3', EXPENSIVE_PER_ACCOUNT: '1' }).limits.expensivePerAccount).toBe(1);
    expect(loadConfig({ LIST_CONCURRENCY: '3', EXPENSIVE_PER_ACCOUNT: '9' }).limits.expensivePerAccount).toBe(3);
    expect(() => loadConfig({ EXPENSIVE_PER_ACCOUNT: '0' })).toThrow(/EXPENSIVE_PER_ACCOUNT/);
    expect(loadConfig({ APPEND_ALONE_DELTA_BYTES: '2048' }).limits.appendAloneDeltaBytes).toBe(2048);
  });

  it('groups up to 32 appends per call, two calls at once with PostgreSQL and one embedded, unless APPEND_BATCH_* say otherwise', () => {
    const pg = 'postgres://localhost/db';
    expect(loadConfig({}).limits).toMatchObject({ appendBatchMax: 32, appendBatchConcurrency: 1 });
    expect(loadConfig({ DATABASE_URL: pg }).limits).toMatchObject({ appendBatchMax: 32, appendBatchConcurrency: 2 });
    expect(loadConfig({ DATABASE_URL: pg, DB_POOL_MAX: '1' }).limits.appendBatchConcurrency).toBe(1);
    expect(loadConfig({ DATABASE_URL: pg, APPEND_BATCH_MAX: '1', APPEND_BATCH_CONCURRENCY: '4' }).limits).toMatchObject({ appendBatchMax: 1, appendBatchConcurrency: 4 });
    expect(configErrorFor({ APPEND_BATCH_MAX: '33' }).message).toMatch(/APPEND_BATCH_MAX/);
    expect(configErrorFor({ APPEND_BATCH_MAX: '0' }).message).toMatch(/APPEND_BATCH_MAX/);
    expect(configErrorFor({ APPEND_BATCH_CONCURRENCY: '0' }).message).toMatch(/APPEND_BATCH_CONCURRENCY/);
  });

  it('reads TENCENT_API_PATH, refusing paths that are not one or that overlap the other routes', () => {
    expect(loadConfig({}).tencentApiPath).toBeUndefined();
    expect(loadConfig({ TENCENT_API_PATH: '/tc3' }).tencentApiPath).toBe('/tc3');
    expect(loadConfig({ TENCENT_API_PATH: '/api/tencent' }).tencentApiPath).toBe('/api/tencent');
    for (const bad of ['tc3', '/tc3/', '/tc3?x=1', '/v1', '/v1/x', '/healthz', '/docs/x']) {
      expect(() => loadConfig({ TENCENT_API_PATH: bad }), bad).toThrow(/TENCENT_API_PATH/);
    }
  });
});
