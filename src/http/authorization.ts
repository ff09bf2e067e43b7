// Authorization for every route of the /v1 scope (docs/design.md §2). Each route declares its action
// (`config.action`); this layer derives the resource it acts on and evaluates the caller's policy.
// A route without an action fails at start-up: forgetting one must never be a silent allow.
import type { FastifyInstance, RouteOptions } from 'fastify';
import { AppError } from '../errors.js';
import type { Principal } from '../lib/principal.js';
import { ACCOUNT_RESOURCE, ACTIONS, type Action, NEW_SPACE_RESOURCE, type Resource, isAllowed, spaceResource } from '../lib/policy.js';

/**
 * Throws ResourceNotFound.SessionSpace unless the account has the space. Injected by buildApp (the
 * spaces module owns the lookup), so that this layer imports no module.
 */
export type AssertSpaceExists = (accountId: string, spaceId: string) => Promise<unknown>;

/**
 * What a route acts on, decided from its action and path alone (so it can be checked at start-up):
 * - `account`: IAM operations, reached only by statements on `*`;
 * - `space`: anything under `/spaces/:spaceId`;
 * - `new-space`: creating a space (it has no id yet), evaluated on `space/*`;
 * - `filtered-list`: the list of spaces, which lets every caller in and filters rows in SQL.
 */
export type ResourceScope = 'account' | 'space' | 'new-space' | 'filtered-list';

const KNOWN_ACTIONS: ReadonlySet<string> = new Set(ACTIONS);

/** The scope of a route, or an Error explaining why the route cannot be authorized. */
export function resourceScopeOf(action: Action | undefined, url: string): ResourceScope | Error {
  if (!action) return new Error('declares no config.action; every /v1 route must name the action it performs');
  if (!KNOWN_ACTIONS.has(action)) return new Error(`declares the unknown action "${action}"`);
  if (action.startsWith('iam:')) return 'account';
  if (/\/:spaceId(\/|$)/.test(url)) return 'space';
  if (action === 'session:CreateSessionSpace') return 'new-space';
  if (action === 'session:DescribeSessionSpaces') return 'filtered-list';
  return new Error(`performs ${action} without a :spaceId path parameter, so no space can be authorized`);
}

function checkRoute(route: RouteOptions): void {
  const scope = resourceScopeOf(route.config?.action, route.url);
  if (scope instanceof Error) {
    const methods = Array.isArray(route.method) ? route.method.join(',') : route.method;
    throw new Error(`Route ${methods} ${route.url}: ${scope.message}.`);
  }
}

/**
 * Adds the start-up check (onRoute) and the per-request check (preHandler, which runs after
 * validation, so `spaceId` is already a well-formed id) to `scope` and the routes registered in it
 * afterwards. Register it after the authentication hook.
 */
export function registerAuthorization(scope: FastifyInstance, assertSpaceExists: AssertSpaceExists): void {
  scope.addHook('onRoute', checkRoute);
  // A callback hook: a request its policy allows outright (the root's, most of them) costs no
  // promise and no turn of the microtask queue (request-logging.ts).
  scope.addHook('preHandler', (request, _reply, done) => {
    if (request.is404) return done();
    const { config, url } = request.routeOptions;
    const routeScope = resourceScopeOf(config.action, url ?? '');
    // Unreachable after the onRoute check; kept so that a bypass fails closed.
    if (routeScope instanceof Error || !config.action) return done(new AppError('InternalError', 'The route declares no authorizable action.'));
    const params = (request.params ?? {}) as { spaceId?: string };
    if (allowedOutright(request.principal, config.action, routeScope, params.spaceId)) return done();
    authorize(assertSpaceExists, request.principal, config.action, routeScope, params.spaceId).then(() => done(), done);
  });
}

/** Whether the policy alone allows it: the root, a filtered list, or a statement that allows the action on the resource. */
function allowedOutright(principal: Principal, action: Action, scope: ResourceScope, spaceId: string | undefined): boolean {
  if (principal.kind === 'root' || scope === 'filtered-list') return true;
  return isAllowed(principal.statements, action, resourceFor(scope, spaceId));
}

/** Throws 403 UnauthorizedOperation (or 404 for a space the account does not have) unless allowed. */
export async function authorize(
  assertSpaceExists: AssertSpaceExists,
  principal: Principal,
  action: Action,
  scope: ResourceScope,
  spaceId: string | undefined,
): Promise<void> {
  // allowedOutright allows a filtered list too; it is named here so that `scope` below is a resource's.
  if (scope === 'filtered-list' || allowedOutright(principal, action, scope, spaceId)) return;
  // A space the account does not have answers the same 404 as for the root: a 403 would tell
  // that the id exists somewhere.
  if (scope === 'space' && spaceId) await assertSpaceExists(principal.accountId, spaceId);
  throw new AppError('UnauthorizedOperation', `The policy does not allow ${action} on ${resourceFor(scope, spaceId)}.`);
}

function resourceFor(scope: Exclude<ResourceScope, 'filtered-list'>, spaceId: string | undefined): Resource {
  switch (scope) {
    case 'account':
      return ACCOUNT_RESOURCE;
    case 'new-space':
      return NEW_SPACE_RESOURCE;
    case 'space':
      if (!spaceId) throw new AppError('InternalError', 'The route has no space to authorize.');
      return spaceResource(spaceId);
  }
}
