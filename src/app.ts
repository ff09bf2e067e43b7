// Builds the Fastify application. No environment reads and no listen: server.ts and the tests
// decide those.
import { randomUUID } from 'node:crypto';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import { jsonSchemaTransform, serializerCompiler } from 'fastify-type-provider-zod';
import type { Limits } from './config.js';
import { type Database, accountDatabasesOf } from './db/connect.js';
import { startEventFeed } from './db/event-feed.js';
import { pingDatabase } from './db/ping.js';
import { registerAccountDatabase } from './http/account-database.js';
import { registerAuthentication } from './http/auth.js';
import { authorize, registerAuthorization } from './http/authorization.js';
import { registerBodyNestingLimit } from './http/body-nesting.js';
import { clientErrorHandler, registerShutdownRefusal } from './http/connection-errors.js';
import { compiledValidatorCompiler } from './http/compiled-validation.js';
import { registerConsole } from './http/console.js';
import { trackDatabaseOutage } from './http/database-outage.js';
import { registerErrorHandling, renderFrameworkError } from './http/error-handler.js';
import { metricsRoutes, registerMetrics } from './http/metrics.js';
import { openapiTransformObject } from './http/openapi-document.js';
import { type RateLimitRedis, rateLimitCounters, registerRateLimit } from './http/rate-limit.js';
import { registerRequestLogging } from './http/request-logging.js';
import { registerRequestTextRules } from './http/request-text.js';
import { usedSignatures } from './http/used-signatures.js';
import type { AppDeps, ZodApp } from './http/zod-app.js';
import type { EventStreamCounts, PoolStats } from './lib/metrics-registry.js';
import { PageTokens } from './lib/page-token.js';
import { createAccountSlots } from './lib/account-slots.js';
import { authenticate, type ListeningCredentialCache } from './modules/accounts/index.js';
import {
  batchingOptions,
  createAppendBatcher,
  type AppendDeps,
  createAppendPath,
  EVENT_STREAM_ACTION,
  createEventStreams,
} from './modules/events/index.js';
import { healthRoutes } from './modules/health/index.js';
import { findSpaceOrThrow } from './modules/spaces/index.js';
import { tencentApiRoutes } from './modules/tencent/index.js';
import { v1Routes } from './routes.js';

export interface BuildAppOptions {
  db: Database;
  limits: Limits;
  /** CREDENTIAL_MASTER_KEY (32 bytes): new secret keys are also stored encrypted under it. */
  credentialMasterKey?: Buffer | undefined;
  /** The key page tokens are signed with (HMAC-SHA256, at least 32 bytes): PAGE_TOKEN_KEY or a generated one. */
  pageTokenKey: Buffer;
  /** A pino logger, or false for none (tests). */
  logger?: FastifyBaseLogger | false;
  /** The database pool, read by the /metrics pool gauges; without it they are left out. */
  pool?: PoolStats | undefined;
  /** METRICS_TOKEN: when set, GET /metrics needs `Authorization: Bearer <token>`. */
  metricsToken?: string | undefined;
  /**
   * The verified-credential cache (startCredentialCache), or none: every request then reads its
   * credential. The app owns it from here: closing the app closes its listener.
   */
  credentialCache?: ListeningCredentialCache | undefined;
  /**
   * REDIS_URL's client (connectRateLimitRedis): the rate limit is counted there, and the used API 3.0
   * signatures are kept there, across instances. Closed with the app.
   */
  rateLimitRedis?: RateLimitRedis | undefined;
  /** TENCENT_API_PATH: the API 3.0 endpoint answers POST on it as well as on `/`. */
  tencentApiPath?: string | undefined;
  /**
   * How often the event streams' feed polls the event counts of the sessions that have open
   * streams (default 250 ms): an append through another instance shows on a stream within this.
   * Appends through this instance wake its streams at once. 0: no polling (heartbeats only).
   */
  eventStreamPollMs?: number | undefined;
  /** A heartbeat comment this often on each open event stream (default 15 s). */
  eventStreamHeartbeatMs?: number | undefined;
  /** The built console served at /console (default console/dist); false: no console. */
  consoleDir?: string | false | undefined;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const OUTAGE_PROBE_TIMEOUT_MS = 1_000;

export async function buildApp({
  db,
  limits,
  credentialMasterKey,
  pageTokenKey,
  logger = false,
  pool,
  metricsToken,
  credentialCache,
  eventStreamPollMs = 250,
  eventStreamHeartbeatMs = 15_000,
  consoleDir,
  rateLimitRedis,
  tencentApiPath,
}: BuildAppOptions): Promise<FastifyInstance> {
  const forAccount = accountDatabasesOf(db);
  const app = Fastify({
    ...(logger ? { loggerInstance: logger } : { logger: false }),
    bodyLimit: limits.bodyBytes,
    // Slow clients cannot hold connections: Node answers 408 and closes a connection whose headers,
    // or whole request with its body, have not arrived in time. It checks these deadlines only every
    // connectionsCheckingInterval (default 30 s), so the interval follows the headers timeout.
    http: {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, Math.max(10, Math.floor(limits.headersTimeoutMs / 4))),
    },
    requestTimeout: limits.requestTimeoutMs, // Fastify sets it on the server again after creating it
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node's own refusals (431 oversize headers, 408, malformed HTTP) and the shutdown drain's 503
    // answer in the error envelope too (http/connection-errors.ts).
    clientErrorHandler,
    return503OnClosing: false,
    // A URL the router cannot decode (a bad percent-escape) gets the error envelope too.
    frameworkErrors: renderFrameworkError,
    // A well-formed X-Request-Id from the caller (or a proxy) is kept, so logs line up end to end.
    genReqId: (request) => {
      const given = request.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID.test(given) ? given : randomUUID();
    },
    // Our own onResponse hook writes the one line per request (with the principal).
    logController: new LogController({ requestIdLogLabel: 'requestId', disableRequestLogging: true }),
    // Identifiers in paths may be 128 characters (the default limit of 100 answers 414); longer
    // ones still reach validation and get a 400 naming the field.
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 1024 },
  }).withTypeProvider() as unknown as ZodApp;

  // JSON everywhere (docs/design.md §3): without Fastify's built-in text/plain parser a non-JSON body is a
  // 415 UnsupportedMediaType instead of a string that fails validation as a 400.
  app.removeContentTypeParser('text/plain');
  app.setValidatorCompiler(compiledValidatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  const databaseOutage = trackDatabaseOutage({ probe: () => pingDatabase(db, OUTAGE_PROBE_TIMEOUT_MS), logger: app.log });
  app.addHook('onClose', async () => databaseOutage.close());
  registerErrorHandling(app, { databaseOutage });
  registerRequestLogging(app);
  registerShutdownRefusal(app);
  const expensiveSlots = createAccountSlots({ total: limits.listConcurrency, perAccount: limits.expensivePerAccount, timeShare: limits.expensiveTimeShare });
  const exportSlots = createAccountSlots({ total: limits.listConcurrency, perAccount: limits.exportsPerAccount, timeShare: limits.expensiveTimeShare });
  const appendBatcher = createAppendBatcher(db, batchingOptions(limits, expensiveSlots));
  const appendPath = createAppendPath(db, limits, appendBatcher, forAccount);
  const eventStreamCounts: EventStreamCounts = { open: 0, sharedReads: 0, catchUpReads: 0 };
  const metrics = registerMetrics(app, { pool, appendBatches: appendBatcher.stats, appendQueue: appendBatcher, eventStreams: eventStreamCounts, expensiveSlots, exportSlots });
  registerBodyNestingLimit(app);
  registerRequestTextRules(app);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Agent Session Service',
        version: '1.0.0',
        description:
          'Sessions, append-only event history and JSON state for stateless AI-agent instances. ' +
          'Every /v1 request authenticates with `Authorization: Bearer <secretId>.<secretKey>`. ' +
          'Isolation between business users inside a space is the application\'s job: permissions are per space.',
      },
      // A fixed example server keeps the generated document the same on every machine.
      servers: [{ url: 'http://localhost:8080', description: 'A local instance (`npm start`, docker compose); replace with your deployment.' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: '<secretId>.<secretKey>' } } },
      security: [{ bearer: [] }],
      tags: [
        { name: 'spaces', description: 'Session spaces' },
        { name: 'sessions', description: 'Sessions of business users' },
        { name: 'events', description: 'Append-only event history' },
        { name: 'context', description: 'The context of the next agent turn: recent events within a budget, state and memo' },
        { name: 'iam', description: 'Sub-accounts, their policies, and credentials' },
        { name: 'health', description: 'Liveness, readiness and Prometheus metrics' },
        {
          name: 'tencent-api',
          description:
            'Tencent Cloud API 3.0 compatibility (ags 2025-09-20): `POST /` (and `TENCENT_API_PATH` when set) serves the twelve Session actions ' +
            '(CreateSessionSpace, DescribeSessionSpace, DescribeSessionSpaces, ModifySessionSpace, DeleteSessionSpace, CreateSession, DescribeSession, ' +
            'DescribeSessions, ModifySession, DeleteSession, AppendEvent, DescribeEvents) named by `X-TC-Action`, with `X-TC-Version: 2025-09-20`, ' +
            '`X-TC-Timestamp` and `Authorization: TC3-HMAC-SHA256 Credential=<secretId>/<date>/<service>/tc3_request, SignedHeaders=content-type;host, Signature=…` ' +
            'computed with the secretKey of a credential of this service. Bodies and answers are the official SDK models\' JSON (PascalCase); every answer is ' +
            'HTTP 200 `{"Response": {..., "RequestId"}}`, errors `{"Response": {"Error": {"Code", "Message"}, "RequestId"}}`. Use an official Tencent Cloud SDK ' +
            'with its endpoint set to this server (README, "Use the Tencent Cloud SDK"; docs/tencent-api.md). Each signature is accepted once (a repeat answers ' +
            '`AuthFailure.SignatureFailure`). The list actions page by `Offset` up to 10000 (past it `InvalidParameterValue`), skipped in the database. ' +
            'The operations are not listed below: they share one path.',
        },
      ],
    },
    transform: jsonSchemaTransform,
    transformObject: openapiTransformObject,
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
  if (consoleDir !== false) await registerConsole(app, consoleDir);

  if (credentialCache) app.addHook('onClose', () => credentialCache.close());
  if (rateLimitRedis) app.addHook('onClose', () => rateLimitRedis.client.quit().then(() => undefined, () => rateLimitRedis.client.disconnect()));
  const cache = credentialCache?.cache;
  // One budget per credential, whichever face it calls.
  const counters = rateLimitCounters(rateLimitRedis);
  // The feed of appends the event streams wait on (src/db/event-feed.ts). Open event streams do not
  // end by themselves: they are ended before the server waits for its connections to finish
  // (preClose), and the feed closes after them.
  const eventFeed = startEventFeed(eventStreamPollMs > 0 ? db : undefined, { intervalMs: eventStreamPollMs });
  const assertSpaceExists = (accountId: string, spaceId: string) => findSpaceOrThrow(db, accountId, spaceId);
  const eventStreams = createEventStreams(db, eventFeed, {
    forAccount,
    heartbeatMs: eventStreamHeartbeatMs,
    perAccount: limits.eventStreamsPerAccount,
    perInstance: limits.eventStreamsPerInstance,
    lifetimeMs: limits.eventStreamLifetimeMs,
    pageBytes: limits.listPageBytes,
    // The same two steps as every /v1 request (authentication, then the route's action on the space).
    reauthorize: async (authorization, spaceId) => {
      const principal = await authenticate(db, authorization, cache);
      await authorize(assertSpaceExists, principal, EVENT_STREAM_ACTION, 'space', spaceId);
    },
    counts: eventStreamCounts,
  });
  app.addHook('preClose', async () => eventStreams.closeAll());
  app.addHook('onClose', () => eventFeed.close());
  const deps: AppDeps & AppendDeps = {
    noAccountDb: db,
    limits,
    credentialMasterKey,
    pageTokens: new PageTokens(pageTokenKey),
    expensiveSlots,
    exportSlots,
    appendPath,
    metrics,
    credentialChangesApplied: credentialCache ? () => credentialCache.catchUp() : async () => {},
    eventFeed,
    eventStreams,
  };
  await app.register(async (scope) => healthRoutes(scope as ZodApp, deps));
  await app.register(async (scope) => metricsRoutes(scope as ZodApp, metrics, metricsToken));
  await app.register(
    async (scope) => {
      registerAuthentication(scope, (authorization) => authenticate(db, authorization, cache));
      registerAuthorization(scope, assertSpaceExists);
      registerAccountDatabase(scope, forAccount);
      await registerRateLimit(scope, limits, counters);
      await v1Routes(scope as ZodApp, deps);
    },
    { prefix: '/v1' },
  );
  // The Tencent Cloud API 3.0 face: signed requests, the same services (modules/tencent).
  await app.register(async (scope) => {
    registerAccountDatabase(scope, forAccount);
    await tencentApiRoutes(scope as ZodApp, deps, { extraPath: tencentApiPath, credentialCache: cache, rateLimitCounters: counters, usedSignatures: usedSignatures(rateLimitRedis) });
  });
  return app;
}
