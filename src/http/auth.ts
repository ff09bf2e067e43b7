// Authentication for every route of the /v1 scope (health, docs and the OpenAPI document are
// outside it). Each route declares the action it performs (`config.action`), which the
// access-control layer evaluates per space.
//
// Round trips per request: none for a credential in this instance's cache (the usual case: the
// cache holds verified credentials and is kept right by the database's change notifications, see
// modules/accounts/credential-cache-listener.ts); one (the credential with its principal and policy)
// on a miss, or whenever the cache is off because its listening connection is down; plus one write,
// at most once a minute per credential, recording its last use. The cache exists because this hook
// runs before every request, and a read per request was a fifth of an append's round trips.
import type { FastifyInstance } from 'fastify';
import type { Principal } from '../lib/principal.js';
import type { Action } from '../lib/policy.js';

export type { Action } from '../lib/policy.js';

/** Resolves the Authorization header to a principal, or throws AuthFailure. */
export type Authenticate = (authorization: string | undefined) => Promise<Principal>;

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
export function registerAuthentication(scope: FastifyInstance, authenticate: Authenticate): void {
  scope.decorateRequest('principal', null as unknown as Principal);
  scope.addHook('onRequest', async (request) => {
    request.principal = await authenticate(request.headers.authorization);
  });
}
