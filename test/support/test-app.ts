// The application on a private database, with one account ready, for tests through app.inject.
import type { FastifyBaseLogger, FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS, type Limits } from '../../src/config.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { type ListeningCredentialCache, startCredentialCache } from '../../src/modules/accounts/credential-cache-listener.js';
import { createTestDatabase, type TestDatabase } from './test-database.js';

export interface TestApp {
  app: FastifyInstance;
  database: TestDatabase;
  db: TestDatabase['db'];
  /** The first account; its root token authenticates `request` by default. */
  account: CreatedAccount;
  /** app.inject with the account's root token (override with `token`, or `token: null` for none). */
  request(options: InjectOptions & { token?: string | null }): Promise<LightMyRequestResponse>;
  createAccount(name?: string): Promise<CreatedAccount>;
  /** The app's verified-credential cache, unless the test turned it off. */
  credentialCache: ListeningCredentialCache | undefined;
  /**
   * Waits until the app's cache has applied every credential change committed so far. A test that
   * changes credentials by direct SQL calls it where the app would otherwise race the notification.
   */
  credentialChangesApplied(): Promise<void>;
  close(): Promise<void>;
}

/** The page-token key of every test app, so a test can sign a token of its own (test/integration/page-token-forgery.test.ts). */
export const TEST_PAGE_TOKEN_KEY = Buffer.alloc(32, 7);

let accountCounter = 0;

/**
 * DEFAULT_LIMITS come from an empty environment, which is the embedded server's (one connection,
 * one append call at a time). On PostgreSQL a server has a DATABASE_URL and so two group-commit
 * calls at once (src/config.ts): test apps get what production gets, so that appends race there.
 */
function productionAppendDefaults(database: TestDatabase): Partial<Limits> {
  return database.kind === 'postgres' ? { appendBatchConcurrency: Math.min(2, database.pool.options.max ?? 2) } : {};
}

export async function createTestApp(
  options: {
    limits?: Partial<Limits>;
    poolMax?: number;
    /** Pool connections one account may hold (DB_POOL_MAX_PER_ACCOUNT; PostgreSQL only). */
    poolPerAccount?: number;
    /** How long a checkout waits for a connection (DB_CONNECT_TIMEOUT_MS; PostgreSQL only). */
    connectTimeoutMs?: number;
    credentialMasterKey?: Buffer;
    logger?: FastifyBaseLogger;
    /** On by default, so that the whole suite runs with it; false: every request reads its credential. */
    credentialCache?: boolean;
    /** TENCENT_API_PATH of the app. */
    tencentApiPath?: string;
    /** The event streams' heartbeat interval (default: the app's). */
    eventStreamHeartbeatMs?: number;
    /** The event feed's poll interval (default: the app's; 0 turns polling off). */
    eventStreamPollMs?: number;
  } = {},
): Promise<TestApp> {
  const database = await createTestDatabase({ poolMax: options.poolMax, poolPerAccount: options.poolPerAccount, connectTimeoutMs: options.connectTimeoutMs });
  const credentialCache = options.credentialCache === false ? undefined : startCredentialCache(database.listen, { maxEntries: 1_000 });
  const app = await buildApp({
    db: database.db,
    pool: database.poolStats,
    limits: { ...DEFAULT_LIMITS, ...productionAppendDefaults(database), ...options.limits },
    credentialMasterKey: options.credentialMasterKey,
    pageTokenKey: TEST_PAGE_TOKEN_KEY,
    logger: options.logger ?? false,
    credentialCache,
    tencentApiPath: options.tencentApiPath,
    eventStreamPollMs: options.eventStreamPollMs,
    eventStreamHeartbeatMs: options.eventStreamHeartbeatMs,
  });
  await app.ready();
  // With a master key, accounts' root credentials carry the encrypted copy TC3 signatures need.
  const newAccount = (name = `account-${process.pid}-${++accountCounter}`) =>
    createAccount(database.db, name, options.credentialMasterKey ? { masterKey: options.credentialMasterKey } : {});
  const account = await newAccount();
  return {
    app,
    database,
    db: database.db,
    account,
    createAccount: newAccount,
    credentialCache,
    credentialChangesApplied: async () => credentialCache?.catchUp(),
    request({ token, headers, ...rest }) {
      const bearer = token === undefined ? account.rootCredential.token : token;
      return app.inject({ ...rest, headers: { ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers } });
    },
    async close() {
      await app.close();
      await database.dispose();
    },
  };
}
