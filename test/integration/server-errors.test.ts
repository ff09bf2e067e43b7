// 5xx answers: an unreachable database is a fast 503 with Retry-After (never a hang or a 500), and
// an unexpected failure is a 500 whose message reveals nothing of the internals.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type DatabaseHandle, openDatabase } from '../../src/db/connect.js';
import { createTestApp, type TestApp, TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

describe('an unreachable database', () => {
  let database: DatabaseHandle;
  let app: FastifyInstance;
  beforeAll(async () => {
    // Port 1 on loopback: nothing listens, connections are refused at once.
    database = await openDatabase({ kind: 'postgres', url: 'postgres://nobody@127.0.0.1:1/none', poolMax: 2, statementTimeoutMs: 1000, connectTimeoutMs: 1000 });
    app = await buildApp({ db: database.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await database.close();
  });

  it('answers /v1 requests with 503 ResourceUnavailable.Database and Retry-After', async () => {
    const token = 'AKID' + 'a'.repeat(32) + '.' + 'b'.repeat(43);
    const started = Date.now();
    const res = await app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization: `Bearer ${token}` } });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('2');
    expect(res.json()).toEqual({
      error: { code: 'ResourceUnavailable.Database', message: expect.any(String), requestId: res.headers['x-request-id'] },
    });
  });

  it('is not ready, while still alive', async () => {
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(503);
    expect(ready.json().error.code).toBe('ResourceUnavailable.Database');
    expect((await app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
  });
});

describe('an unexpected failure', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => t.close());

  it('answers 500 InternalError without the internal message', async () => {
    const app = await buildApp({ db: t.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS });
    app.get('/boom', async () => {
      throw new Error('relation "secret_internal_table" does not exist');
    });
    await app.ready();
    const res = await app.inject({ method: 'GET', url: '/boom' });
    await app.close();
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: { code: 'InternalError', message: expect.any(String), requestId: res.headers['x-request-id'] } });
    expect(res.body).not.toContain('secret_internal_table');
  });
});
