// Rate limiting per credential for the /v1 scope. It is keyed by the verified credential: a request
// that merely names someone's secretId with a wrong key is refused by authentication (onRequest)
// and never touches that credential's bucket. It runs at preValidation: after authentication, but
// before validation and authorization (a preHandler), so invalid and refused requests spend the
// bucket too; otherwise a credential could hammer the database with requests answered 400 or 403.
//
// Without a shared store the counters live in this instance's memory, so N instances allow N × the
// limit. With REDIS_URL they live in Redis (the plugin's own Redis store, over ioredis): one
// counter per credential for every instance. If Redis cannot answer, the request is served without
// a count (fail open, skipOnError): the limit protects the database from one noisy credential, it
// is not an authorization, and an outage of the counter store must not become an outage of the
// API. Commands fail fast while Redis is away (no offline queue, short timeouts), and ioredis keeps
// reconnecting; once it is back, counting resumes.
import rateLimit, { type FastifyRateLimitStore, type FastifyRateLimitStoreCtor } from '@fastify/rate-limit';
// The plugin's own in-memory store (not exported by name): one instance serves every scope.
// @ts-expect-error -- the module has no type declarations; its shape is FastifyRateLimitStore.
import PluginLocalStore from '@fastify/rate-limit/store/LocalStore.js';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import type { Limits } from '../config.js';
import { AppError } from '../errors.js';

/** The shared store: a connected ioredis client and the prefix of this deployment's keys. */
export interface RateLimitRedis {
  client: Redis;
  keyPrefix: string;
}

/** The two pino methods used, so any pino logger (or a test's recorder) fits. */
export interface RedisLogger {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

// A request waits at most this long for its count before it is served uncounted.
const REDIS_COMMAND_TIMEOUT_MS = 500;

/**
 * An ioredis client for the rate limit, tuned to fail fast; it logs when Redis goes away and when
 * it is back (once each, not once per request). Close it with `client.quit()` (buildApp does).
 */
export function connectRateLimitRedis(url: string, keyPrefix: string, logger?: RedisLogger): RateLimitRedis {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: REDIS_COMMAND_TIMEOUT_MS,
    commandTimeout: REDIS_COMMAND_TIMEOUT_MS,
  });
  let available = true;
  let lastError: Error | undefined;
  const lost = () => {
    if (!available) return;
    available = false;
    logger?.warn({ err: lastError }, 'rate limit: Redis is unreachable; requests are served uncounted until it is back');
  };
  // A refused connection reports 'error'; a server that goes away reports 'close' (without one).
  client.on('error', (err: Error) => {
    lastError = err;
    lost();
  });
  client.on('close', lost);
  client.on('ready', () => {
    if (available) return;
    available = true;
    logger?.info({}, 'rate limit: Redis is back; counting per credential across instances again');
  });
  return { client, keyPrefix };
}

/**
 * Resolves true once the client is connected, false after `timeoutMs` without. The server waits
 * for it before it listens, so that its first requests are counted too; a Redis that is down at
 * start does not keep the service from starting (fail open, as above).
 */
export async function rateLimitRedisReady({ client }: RateLimitRedis, timeoutMs: number): Promise<boolean> {
  if (client.status === 'ready') return true;
  return new Promise((resolve) => {
    const done = (ready: boolean) => {
      clearTimeout(timer);
      client.off('ready', onReady);
      resolve(ready);
    };
    const onReady = () => done(true);
    const timer = setTimeout(() => done(false), timeoutMs);
    client.on('ready', onReady);
  });
}

// Bound the memory the counters may take: the least recently used credentials are forgotten.
const LOCAL_COUNTERS = 10_000;

/**
 * Where a credential's requests are counted. One value per app, handed to every scope that limits
 * (the REST API and the API 3.0 endpoint), so a credential has one budget whichever face it calls:
 * in Redis (shared by every instance), or else in one in-memory store of this instance. (The
 * plugin would otherwise give each registration counters of its own.)
 */
export type RateLimitCounters = { kind: 'redis'; redis: RateLimitRedis } | { kind: 'memory'; store: FastifyRateLimitStoreCtor };

export function rateLimitCounters(shared?: RateLimitRedis): RateLimitCounters {
  if (shared) return { kind: 'redis', redis: shared };
  const counters = new PluginLocalStore(false, false, LOCAL_COUNTERS) as FastifyRateLimitStore;
  // The plugin constructs its store from this class; every construction answers the one instance.
  const store = function SharedLocalStore() {
    return counters;
  } as unknown as FastifyRateLimitStoreCtor;
  return { kind: 'memory', store };
}

/** Registers the limiter on `scope`; call it before the scope's routes are added. */
export async function registerRateLimit(
  scope: FastifyInstance,
  limits: Pick<Limits, 'rateLimitMax' | 'rateLimitWindowMs'>,
  counters: RateLimitCounters,
): Promise<void> {
  if (limits.rateLimitMax === 0) return; // 0 turns it off (the plugin would read 0 as "refuse all")
  await scope.register(rateLimit, {
    max: limits.rateLimitMax,
    timeWindow: limits.rateLimitWindowMs,
    hook: 'preValidation',
    keyGenerator: (request) => request.principal.secretId,
    ...(counters.kind === 'redis'
      ? { redis: counters.redis.client, nameSpace: counters.redis.keyPrefix, skipOnError: true }
      : { store: counters.store }),
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
