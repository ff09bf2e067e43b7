// Runs each authenticated request's handler on behalf of its account (lib/account-scope.ts), so
// that the database connections it checks out count against that account's share of the pool
// (db/fair-pool.ts).
import type { FastifyInstance } from 'fastify';
import { runForAccount } from '../lib/account-scope.js';

/** Adds the hook to `scope`; its routes' principal must be set by an earlier hook (authentication). */
export function registerAccountScope(scope: FastifyInstance): void {
  // A hook with a callback: Fastify calls the handler from inside done(), so the handler and all
  // it starts run in the account's context (an async hook's context would end with the hook).
  scope.addHook('preHandler', (request, _reply, done) => {
    const accountId = (request.principal as { accountId?: string } | null)?.accountId;
    if (accountId) runForAccount(accountId, done);
    else done();
  });
}
