// The per-credential rate limit shared through Redis (REDIS_URL): two instances with one
// credential share one bucket, and when Redis goes away the service keeps serving (fail open),
// counting again once it is back. Without Redis each instance counts alone (the control).
//
// The two-instance test uses the machine's Redis (TEST_REDIS_URL, default 127.0.0.1:6379) under a
// key prefix of its own and deletes only its own keys; the fail-open test stops a private
// redis-server it started.
import { randomBytes } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { connectRateLimitRedis, type RateLimitRedis, rateLimitRedisReady } from '../../src/http/rate-limit.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { createPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const SHARED_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `ass-test-${randomBytes(6).toString('hex')}:`;
const MAX = 6;

let database: TestDatabase;
let account: CreatedAccount;
const apps: FastifyInstance[] = [];
let inspector: Redis;
let privateRedis: PrivateRedis | undefined;

beforeAll(async () => {
  database = await createTestDatabase();
  account = await createAccount(database.db, `rate-limit-redis-${process.pid}`);
  inspector = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  for (const app of apps) await app.close();
  // Only this file's keys: the shared Redis may hold other runs' and other tests' counters.
  const keys = await inspector.keys(`${PREFIX}*`);
  if (keys.length > 0) await inspector.del(...keys);
  inspector.disconnect();
  await privateRedis?.remove();
  await database?.dispose();
});

async function instance(max: number, redis?: RateLimitRedis): Promise<FastifyInstance> {
  const app = await buildApp({
    db: database.db,
    pageTokenKey: TEST_PAGE_TOKEN_KEY,
    limits: { ...DEFAULT_LIMITS, rateLimitMax: max, rateLimitWindowMs: 60_000 },
    rateLimitRedis: redis,
  });
  apps.push(app);
  return app;
}

const listSpaces = (app: FastifyInstance, token = account.rootCredential.token) =>
  app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization: `Bearer ${token}` } });

describe('rate limit shared through Redis', () => {
  it('holds one limit for one credential across two instances', { timeout: 30_000 }, async () => {
    const clients = [connectRateLimitRedis(SHARED_REDIS_URL, PREFIX), connectRateLimitRedis(SHARED_REDIS_URL, PREFIX)];
    // As the server does before it listens: until connected, requests would pass uncounted.
    expect(await Promise.all(clients.map((client) => rateLimitRedisReady(client, 10_000)))).toEqual([true, true]);
    const [a, b] = (await Promise.all(clients.map((client) => instance(MAX, client)))) as [FastifyInstance, FastifyInstance];
    // Twice the limit, alternating between the instances, all at once.
    const answers = await Promise.all(Array.from({ length: 2 * MAX }, (_, i) => listSpaces(i % 2 ? a : b)));
    const statuses = answers.map((res) => res.statusCode);
    expect(statuses.filter((s) => s === 200)).toHaveLength(MAX);
    expect(statuses.filter((s) => s === 429)).toHaveLength(MAX);
    for (const refused of answers.filter((res) => res.statusCode === 429)) expect(refused.json().error.code).toBe('RequestLimitExceeded');
    // One counter for the credential, under this deployment's prefix, counting every request.
    const keys = await inspector.keys(`${PREFIX}*`);
    expect(keys).toEqual([`${PREFIX}${account.rootCredential.secretId}`]);
    expect(Number(await inspector.get(keys[0]!))).toBe(2 * MAX);
    // The secret key never reaches Redis: the key is the public secretId.
    expect(keys[0]).not.toContain(account.rootCredential.token.split('.')[1]);
  });

  it('without Redis each instance counts alone (the control: twice the limit passes)', async () => {
    const other = await createAccount(database.db, `rate-limit-local-${process.pid}`);
    const [a, b] = await Promise.all([instance(MAX), instance(MAX)]);
    const answers = await Promise.all(Array.from({ length: 2 * MAX }, (_, i) => listSpaces(i % 2 ? a : b, other.rootCredential.token)));
    expect(answers.map((res) => res.statusCode)).toEqual(Array.from({ length: 2 * MAX }, () => 200));
  });

  it('keeps serving, uncounted, while Redis is away (fail open) and counts again once it is back', { timeout: 60_000 }, async () => {
    privateRedis = await createPrivateRedis();
    await privateRedis.start();
    const logged: { level: string; message: string }[] = [];
    const logger = {
      warn: (_: object, message: string) => void logged.push({ level: 'warn', message }),
      info: (_: object, message: string) => void logged.push({ level: 'info', message }),
    };
    const redis = connectRateLimitRedis(privateRedis.url, PREFIX, logger);
    expect(await rateLimitRedisReady(redis, 10_000)).toBe(true);
    const app = await instance(3, redis);
    const other = await createAccount(database.db, `rate-limit-fail-open-${process.pid}`);
    const token = other.rootCredential.token;

    // Counted in Redis: the fourth request is refused.
    for (let i = 0; i < 3; i++) expect((await listSpaces(app, token)).statusCode).toBe(200);
    expect((await listSpaces(app, token)).statusCode).toBe(429);

    await privateRedis.kill();
    // Redis is gone: every request is served (no 5xx, no 429), concurrently too.
    const whileAway = await Promise.all(Array.from({ length: 8 }, () => listSpaces(app, token)));
    expect(whileAway.map((res) => res.statusCode)).toEqual(Array.from({ length: 8 }, () => 200));
    expect(logged.filter((line) => line.level === 'warn')).toHaveLength(1);

    // Back (empty: nothing was persisted): the client reconnects and the limit holds again.
    await privateRedis.start();
    expect(await rateLimitRedisReady(redis, 20_000)).toBe(true);
    for (let i = 0; i < 3; i++) expect((await listSpaces(app, token)).statusCode).toBe(200);
    const refused = await listSpaces(app, token);
    expect(refused.statusCode).toBe(429);
    expect(refused.json().error.code).toBe('RequestLimitExceeded');
    expect(logged.map((line) => line.level)).toEqual(['warn', 'info']);
  });
});
