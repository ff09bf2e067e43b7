// One log line per request, with the request id, the principal and the latency. The Authorization
// header is never logged; the principal is named by its ids.
import type { FastifyInstance, FastifyRequest } from 'fastify';

// Load balancers and Prometheus call these every few seconds; at info level they would bury the
// requests that matter. They are logged at debug level (LOG_LEVEL=debug shows them).
const PROBE_ROUTES = new Set(['/healthz', '/readyz', '/metrics']);

// The hooks take a callback rather than being async: an async hook costs every request a promise
// and a turn of the microtask queue for nothing (bench/README.md, issue 24).
export function registerRequestLogging(app: FastifyInstance): void {
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('x-request-id', request.id);
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const line = {
      method: request.method,
      route: request.routeOptions.url,
      statusCode: reply.statusCode,
      latencyMs: Math.round(reply.elapsedTime * 100) / 100,
      principal: request.principal ? { accountId: request.principal.accountId, principalId: request.principal.principalId } : undefined,
    };
    if (isProbe(request) && reply.statusCode < 400) request.log.debug(line, 'request completed');
    else request.log.info(line, 'request completed');
    done();
  });
}

// Only an answered probe goes to debug: a failing /readyz, or a refused /metrics scrape, stays an info line.
function isProbe(request: FastifyRequest): boolean {
  return request.method === 'GET' && PROBE_ROUTES.has(request.routeOptions.url ?? '');
}
