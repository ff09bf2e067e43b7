// Rate limiting per credential for the /v1 scope. It is keyed by the verified credential: a request
// that merely names someone's secretId with a wrong key is refused by authentication (onRequest)
// and never touches that credential's bucket. It runs at preValidation: after authentication, but
// before validation and authorization (a preHandler), so invalid and refused requests spend the
// bucket too; otherwise a credential could hammer the database with requests answered 400 or 403.
// The counters live in this instance's memory, so N instances allow N × the limit; a shared store
// (Redis, PostgreSQL) is future work.
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance } from 'fastify';
import type { Limits } from '../config.js';
import { AppError } from '../errors.js';

/** Registers the limiter on `scope`; call it before the scope's routes are added. */
export async function registerRateLimit(scope: FastifyInstance, limits: Pick<Limits, 'rateLimitMax' | 'rateLimitWindowMs'>): Promise<void> {
  if (limits.rateLimitMax === 0) return; // 0 turns it off (the plugin would read 0 as "refuse all")
  await scope.register(rateLimit, {
    max: limits.rateLimitMax,
    timeWindow: limits.rateLimitWindowMs,
    hook: 'preValidation',
    keyGenerator: (request) => request.principal.secretId,
    // Bound the memory the counters may take: the least recently used credentials are forgotten.
    cache: 10_000,
    // Our error handler renders the envelope; the plugin has already set the X-RateLimit-* headers
    // and Retry-After, repeated here so the answer does not depend on the plugin's header handling.
    errorResponseBuilder: (_request, context) => {
      const retryAfterSeconds = Math.max(1, Math.ceil(context.ttl / 1000));
      return new AppError(
        'RequestLimitExceeded',
        `Too many requests for this credential: at most ${context.max} per ${limits.rateLimitWindowMs / 1000} s. Retry in ${retryAfterSeconds} s.`,
        { headers: { 'retry-after': String(retryAfterSeconds) } },
      );
    },
  });
}
