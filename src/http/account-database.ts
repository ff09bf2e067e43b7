// Gives each authenticated request the database handle of its account (db/connect.ts accountDatabasesOf),
// so that the connections its handlers check out count against that account's share of the pool
// (db/fair-pool.ts). Handlers and the services they call use request.db, never the app's own handle:
// that one is for work of no account (start-up, background jobs, a batch of several accounts'
// appends), which has no share to keep to.
import type { FastifyInstance } from 'fastify';
import type { AccountDatabases, Database } from '../db/connect.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The database, as this request's account: set once the request is authenticated. */
    db: Database;
  }
}

/** Adds the hook to `scope`; its routes' principal must be set by an earlier hook (authentication). */
export function registerAccountDatabase(scope: FastifyInstance, forAccount: AccountDatabases): void {
  scope.decorateRequest('db', null as unknown as Database);
  scope.addHook('preHandler', (request, _reply, done) => {
    const accountId = (request.principal as { accountId?: string } | null)?.accountId;
    if (accountId) request.db = forAccount(accountId);
    done();
  });
}
