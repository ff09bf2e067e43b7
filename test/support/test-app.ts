// The application on a private database, with one account ready, for tests through app.inject.
import type { FastifyBaseLogger, FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS, type Limits } from '../../src/config.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
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
  close(): Promise<void>;
}

let accountCounter = 0;

export async function createTestApp(
  options: { limits?: Partial<Limits>; poolMax?: number; credentialMasterKey?: Buffer; logger?: FastifyBaseLogger } = {},
): Promise<TestApp> {
  const database = await createTestDatabase({ poolMax: options.poolMax });
  const app = await buildApp({ db: database.db, pool: database.pool, limits: { ...DEFAULT_LIMITS, ...options.limits }, credentialMasterKey: options.credentialMasterKey, logger: options.logger ?? false });
  await app.ready();
  const newAccount = (name = `account-${process.pid}-${++accountCounter}`) => createAccount(database.db, name);
  const account = await newAccount();
  return {
    app,
    database,
    db: database.db,
    account,
    createAccount: newAccount,
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
