// `GET /metrics` (Prometheus text format) and the hook that counts and times every request.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { type AppMetrics, createAppMetrics } from '../lib/metrics-registry.js';
import { ErrorBody } from './schemas.js';
import type { ZodApp } from './zod-app.js';

const METRICS_PATH = '/metrics';
/** The route label of requests no route matched: the raw URL would carry ids and explode cardinality. */
const UNMATCHED = 'unmatched';

/**
 * Creates the app's metrics and adds the request hook to the root instance. Call it before any
 * route or plugin is registered, so that the hook applies to all of them.
 */
export function registerMetrics(app: FastifyInstance, options: Parameters<typeof createAppMetrics>[0] = {}): AppMetrics {
  const metrics = createAppMetrics(options);

  // Scrapes are left out: each would change the counts it reports, and Prometheus records its own
  // scrape durations (scrape_duration_seconds).
  // A callback hook, not an async one: no promise per request (request-logging.ts).
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? UNMATCHED;
    if (route !== METRICS_PATH) metrics.http.record(request.method, route, reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
  return metrics;
}

/**
 * `GET /metrics`. Registered after @fastify/swagger (which documents only the routes added after it).
 * `token` is METRICS_TOKEN: when set, a scrape must send `Authorization: Bearer <token>`.
 */
export async function metricsRoutes(app: ZodApp, metrics: AppMetrics, token: string | undefined): Promise<void> {
  const expected = token === undefined ? undefined : digest(token);
  app.get(
    METRICS_PATH,
    {
      schema: {
        tags: ['health'],
        security: [],
        summary: 'Prometheus metrics',
        operationId: 'getMetrics',
        description:
          'Prometheus text exposition format 0.0.4: request counts and latency histograms by route template and status, ' +
          'database pool connections (open, idle, in use, waiting), appends, replays and state sizes, and the process ' +
          '(RSS, heap, event-loop lag, GC). Unauthenticated by default, like /healthz: the figures name no account, space ' +
          'or session. When the server sets METRICS_TOKEN, a scrape must send `Authorization: Bearer <METRICS_TOKEN>` ' +
          '(otherwise 401 AuthFailure).',
        response: {
          200: { description: 'The metrics.', content: { 'text/plain; version=0.0.4': { schema: z.string() } } },
          401: ErrorBody.describe('Error codes: AuthFailure (only when METRICS_TOKEN is set).'),
        },
      },
    },
    async (request, reply) => {
      if (expected && !matches(expected, request.headers.authorization)) {
        throw new AppError('AuthFailure', 'GET /metrics needs Authorization: Bearer <METRICS_TOKEN>.', { headers: { 'www-authenticate': 'Bearer' } });
      }
      // A string with a non-JSON content type is sent as is, without the zod serializer.
      return reply.type(metrics.contentType).send(await metrics.render());
    },
  );
}

// Digests of equal length, so the comparison takes the same time whatever the caller sent.
function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function matches(expected: Buffer, authorization: string | undefined): boolean {
  const given = authorization?.startsWith('Bearer ') ? authorization.slice('Bearer '.length) : undefined;
  return given !== undefined && timingSafeEqual(expected, digest(given));
}
