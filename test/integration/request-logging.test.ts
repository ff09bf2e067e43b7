// docs/design.md §7: one pino JSON line per request with the request id, the principal and the latency;
// never a secret.
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

interface LogLine {
  level: number;
  msg: string;
  requestId?: string;
  statusCode?: number;
  latencyMs?: number;
  method?: string;
  route?: string;
  principal?: { accountId: string; principalId: string };
}

let database: TestDatabase;
let app: FastifyInstance;
let account: CreatedAccount;
let raw: string[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      raw.push(chunk.toString());
      done();
    },
  });
  app = await buildApp({ db: database.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS, logger: pino({ level: 'info' }, stream) });
  await app.ready();
  account = await createAccount(database.db, 'logging');
});
afterAll(async () => {
  await app.close();
  await database.dispose();
});

const lines = (): LogLine[] =>
  raw
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as LogLine);
const requestLines = () => lines().filter((line) => line.msg === 'request completed');

describe('request logging', () => {
  it('writes one line per request with request id, principal, status and latency', async () => {
    raw = [];
    const { token } = account.rootCredential;
    const authorization = `Bearer ${token}`;
    const responses = [
      await app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization, 'x-request-id': 'trace-log-1' } }),
      await app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization } }),
      await app.inject({ method: 'POST', url: '/v1/spaces', headers: { authorization, 'content-type': 'application/json' }, payload: '{"name":' }),
      await app.inject({ method: 'GET', url: '/v1/spaces' }),
      await app.inject({ method: 'GET', url: '/v1/spaces/space-none' }),
    ];
    expect(responses.map((res) => res.statusCode)).toEqual([200, 200, 400, 401, 401]);

    const logged = requestLines();
    expect(logged).toHaveLength(responses.length);
    logged.forEach((line, i) => {
      const res = responses[i]!;
      expect(line.requestId).toBe(res.headers['x-request-id']);
      expect(line.statusCode).toBe(res.statusCode);
      expect(typeof line.latencyMs).toBe('number');
      expect(line.latencyMs).toBeGreaterThanOrEqual(0);
      expect(line.level).toBe(30);
    });
    expect(logged[0]!.requestId).toBe('trace-log-1');
    // The principal is named by ids once authenticated, and absent when nobody was.
    for (const line of logged.slice(0, 3)) expect(line.principal).toEqual({ accountId: account.accountId, principalId: 'root' });
    expect(logged[3]!.principal).toBeUndefined();
    expect(logged[4]!.principal).toBeUndefined();
    expect(logged[0]).toMatchObject({ method: 'GET', route: '/v1/spaces' });
  });

  it('logs answered health probes and metrics scrapes at debug level only: nothing at info', async () => {
    raw = [];
    const probes = ['/healthz', '/readyz', '/metrics'];
    for (const url of probes) expect((await app.inject({ method: 'GET', url })).statusCode).toBe(200);
    expect(requestLines()).toEqual([]);

    const debugRaw: string[] = [];
    const stream = new Writable({
      write(chunk: Buffer, _encoding, done) {
        debugRaw.push(chunk.toString());
        done();
      },
    });
    const debugApp = await buildApp({ db: database.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS, logger: pino({ level: 'debug' }, stream) });
    try {
      for (const url of probes) await debugApp.inject({ method: 'GET', url });
    } finally {
      await debugApp.close();
    }
    const logged = debugRaw.map((line) => JSON.parse(line) as LogLine).filter((line) => line.msg === 'request completed');
    expect(logged.map((line) => [line.route, line.level, line.statusCode])).toEqual(probes.map((route) => [route, 20, 200]));
  });

  it('never writes the secret key or the Authorization header', async () => {
    raw = [];
    const { token, secretKey } = account.rootCredential;
    const wrongKey = 'W'.repeat(43);
    await app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization: `Bearer ${token}` } });
    await app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization: `Bearer ${account.rootCredential.secretId}.${wrongKey}` } });
    await app.inject({ method: 'GET', url: `/v1/spaces?pageToken=${token}`, headers: { authorization: `Bearer ${token}` } });
    await app.inject({ method: 'GET', url: '/v1/no-such-route', headers: { authorization: `Bearer ${token}` } });

    const text = raw.join('');
    expect(requestLines()).toHaveLength(4);
    expect(text).not.toContain(secretKey);
    expect(text).not.toContain(wrongKey);
    expect(text).not.toContain('Bearer');
    expect(text.toLowerCase()).not.toContain('authorization');
  });

  it('never writes the secrets that IAM issues, nor the tokens they are used with', async () => {
    raw = [];
    const authorization = `Bearer ${account.rootCredential.token}`;
    const json = { authorization, 'content-type': 'application/json' };
    const sub = await app.inject({ method: 'POST', url: '/v1/iam/subaccounts', headers: json, payload: { name: 'logged-sub' } });
    expect(sub.statusCode).toBe(201);
    const issued = [
      await app.inject({ method: 'POST', url: `/v1/iam/subaccounts/${sub.json().subAccountId}/credentials`, headers: { authorization } }),
      await app.inject({ method: 'POST', url: '/v1/iam/credentials', headers: { authorization } }),
    ];
    for (const res of issued) {
      expect(res.statusCode).toBe(201);
      // Using the new credential, even where its (empty) policy refuses, logs nothing secret either.
      await app.inject({ method: 'GET', url: '/v1/spaces', headers: { authorization: `Bearer ${res.json().token}` } });
    }
    const text = raw.join('');
    expect(requestLines()).toHaveLength(5);
    for (const res of issued) expect(text).not.toContain(res.json().secretKey);
    expect(text).not.toContain('Bearer');
  });
});
