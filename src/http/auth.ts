// Authentication for every route of the /v1 scope (health, docs and the OpenAPI document are
// outside it). Each route declares the action it performs (`config.action`), which the
// access-control layer evaluates per space.
import type { FastifyInstance } from 'fastify';
import type { Database } from '../db/connect.js';
import { authenticate } from '../modules/accounts/accounts.service.js';
import type { Principal } from '../modules/accounts/principal.js';
import type { Action } from '../modules/iam/policy.js';

export type { Action } from '../modules/iam/policy.js';


declare module 'fastify' {
  interface FastifyContextConfig {
    /** The operation a route performs; required on every /v1 route. */
    action?: Action;
  }
  interface FastifyRequest {
    principal: Principal;
  }
}

/** Adds the authentication hook to `scope` (an encapsulated plugin) and the routes under it. */
export function registerAuthentication(scope: FastifyInstance, db: Database): void {
  scope.decorateRequest('principal', null as unknown as Principal);
  scope.addHook('onRequest', async (request) => {
    request.principal = await authenticate(db, request.headers.authorization);
  });
}
