// An API 3.0 signature is accepted once (docs/tencent-api.md, "Each signature is accepted once").
// The SDKs sign only `content-type;host`, so without that rule a captured request could be sent
// again (one signed AppendEvent storing three events), or sent with another X-TC-Action (a signed
// DescribeSession body resent as DeleteSession). Each attack is made here with
// the official SDK's own signing function, on one instance without Redis and on two instances that
// share the machine's Redis (TEST_REDIS_URL, default 127.0.0.1:6379) under a key prefix of this
// file's own, whose keys alone it deletes.
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { connectRateLimitRedis, rateLimitRedisReady } from '../../src/http/rate-limit.js';
import { type CreatedAccount, createAccount } from '../../src/modules/accounts/accounts.service.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { createPrivateRedis, type PrivateRedis } from '../support/private-redis.js';
import { listenOnLoopback, sdkClient } from '../support/tencent-client.js';
import { TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

type Sign3 = (options: Record<string, unknown>) => string;
const sign3 = (createRequire(import.meta.url)('tencentcloud-sdk-nodejs-common/tencentcloud/common/sign.js') as { default: { sign3: Sign3 } }).default.sign3;

const SHARED_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const PREFIX = `ass-test-${randomBytes(6).toString('hex')}:`;
const MASTER_KEY = Buffer.alloc(32, 5);

let database: TestDatabase;
let account: CreatedAccount;
let inspector: Redis;
let privateRedis: PrivateRedis | undefined;
const apps: FastifyInstance[] = [];

beforeAll(async () => {
  database = await createTestDatabase();
  account = await createAccount(database.db, `tencent-replay-${process.pid}`, { masterKey: MASTER_KEY });
  inspector = new Redis(SHARED_REDIS_URL, { maxRetriesPerRequest: 1 });
});

afterAll(async () => {
  for (const app of apps) await app.close();
  const keys = await inspector.keys(`${PREFIX}*`);
  if (keys.length > 0) await inspector.del(...keys);
  inspector.disconnect();
  await privateRedis?.remove();
  await database?.dispose();
});

/** An instance on the shared database; with `redisUrl`, its used signatures (and rate limit) live there. */
async function instance(redisUrl?: string): Promise<FastifyInstance> {
  const redis = redisUrl ? connectRateLimitRedis(redisUrl, PREFIX) : undefined;
  if (redis) expect(await rateLimitRedisReady(redis, 10_000)).toBe(true);
  const app = await buildApp({
    db: database.db,
    pageTokenKey: TEST_PAGE_TOKEN_KEY,
    credentialMasterKey: MASTER_KEY,
    limits: { ...DEFAULT_LIMITS, rateLimitMax: 0 },
    rateLimitRedis: redis,
  });
  apps.push(app);
  return app;
}

type Fields = Record<string, unknown>;
interface Signed {
  headers: Record<string, string>;
  payload: string;
  signature: string;
}

/** A request as the SDK signs it (its own sign3: `content-type;host`, not the action). */
function signed(action: string, body: Fields, timestamp = Math.floor(Date.now() / 1000)): Signed {
  const { secretId, secretKey } = account.rootCredential;
  const authorization = sign3({ method: 'POST', url: 'http://localhost/', payload: body, timestamp, service: 'ags', secretId, secretKey, headers: { 'Content-Type': 'application/json' } });
  return {
    headers: { 'content-type': 'application/json', authorization, 'x-tc-action': action, 'x-tc-version': '2025-09-20', 'x-tc-timestamp': String(timestamp) },
    payload: JSON.stringify(body),
    signature: /Signature=([0-9a-f]{64})/.exec(authorization)![1]!,
  };
}

/** Sends `request` as captured, optionally with another X-TC-Action; answers the envelope's Response. */
async function send(app: FastifyInstance, request: Signed, action?: string): Promise<Fields & { Error?: { Code: string; Message: string } }> {
  const headers = action ? { ...request.headers, 'x-tc-action': action } : request.headers;
  const res = await app.inject({ method: 'POST', url: '/', headers, payload: request.payload });
  expect(res.statusCode).toBe(200);
  return (res.json() as { Response: Fields & { Error?: { Code: string; Message: string } } }).Response;
}

let sessionCounter = 0;
/** A new session (a fresh signed CreateSession); answers its key as the actions name it. */
async function newSession(app: FastifyInstance): Promise<{ SpaceId: string; UserId: string; SessionId: string }> {
  const key = { SpaceId: account.defaultSpaceId, UserId: 'u', SessionId: `s-${process.pid}-${++sessionCounter}` };
  // With a Title: the bare key is also DescribeSession's whole body, and the same body signed in the
  // same second is the same signature, whatever the action.
  expect((await send(app, signed('CreateSession', { ...key, Title: 'replay' }))).Error).toBeUndefined();
  return key;
}

async function eventCount(sessionId: string): Promise<number> {
  const row = await database.db.selectFrom('events').select((eb) => eb.fn.countAll<string>().as('n')).where('session_id', '=', sessionId).executeTakeFirstOrThrow();
  return Number(row.n);
}

async function sessionExists(sessionId: string): Promise<boolean> {
  return (await database.db.selectFrom('sessions').select('session_id').where('session_id', '=', sessionId).executeTakeFirst()) !== undefined;
}

/** Expects `attempt` to answer AuthFailure.SignatureFailure saying why, and no table to change. */
async function expectReplayRefused(attempt: () => Promise<Fields & { Error?: { Code: string; Message: string } }>) {
  const before = await tableFingerprints(database.db);
  const answer = await attempt();
  expect(answer.Error).toEqual({ Code: 'AuthFailure.SignatureFailure', Message: expect.stringContaining('already used') });
  expect(changedTables(before, await tableFingerprints(database.db))).toEqual([]);
}

const appendBody = (key: Fields) => ({ ...key, Event: { Author: 'agent', Content: { Role: 'model', Parts: [{ Text: 'hello' }] } } });

describe('one instance without Redis', () => {
  let app: FastifyInstance;
  beforeAll(async () => {
    app = await instance();
  });

  it('stores a signed AppendEvent (no EventId) sent three times once, refusing the repeats', async () => {
    const key = await newSession(app);
    const append = signed('AppendEvent', appendBody(key));
    expect((await send(app, append)).Event).toEqual(expect.objectContaining({ EventId: expect.any(String) }));
    await expectReplayRefused(() => send(app, append));
    await expectReplayRefused(() => send(app, append));
    expect(await eventCount(key.SessionId)).toBe(1);
  });

  it('refuses a signed DescribeSession resent as DeleteSession: the session is still there', async () => {
    const key = await newSession(app);
    const describe = signed('DescribeSession', key);
    expect((await send(app, describe)).Session).toEqual(expect.objectContaining({ SessionId: key.SessionId }));
    await expectReplayRefused(() => send(app, describe, 'DeleteSession'));
    expect(await sessionExists(key.SessionId)).toBe(true);
  });

  it('lets reads and CreateSession share a signature, each action once: a get-or-create in one second works, an exact repeat does not', async () => {
    // The bare key is the whole body of DescribeSession, CreateSession and DescribeEvents: signed in
    // one second, the three carry one signature.
    const key = { SpaceId: account.defaultSpaceId, UserId: 'u', SessionId: `get-or-create-${process.pid}` };
    const timestamp = Math.floor(Date.now() / 1000);
    expect((await send(app, signed('DescribeSession', key, timestamp))).Error?.Code).toBe('ResourceNotFound.Session');
    expect((await send(app, signed('CreateSession', key, timestamp))).Session).toEqual(expect.objectContaining({ SessionId: key.SessionId }));
    expect((await send(app, signed('DescribeEvents', key, timestamp))).TotalCount).toBe(0);
    // Each action once, and never a write after a read.
    await expectReplayRefused(() => send(app, signed('DescribeSession', key, timestamp)));
    await expectReplayRefused(() => send(app, signed('CreateSession', key, timestamp)));
    await expectReplayRefused(() => send(app, signed('DeleteSession', key, timestamp)));
    await expectReplayRefused(() => send(app, signed('ModifySession', key, timestamp)));
    expect(await sessionExists(key.SessionId)).toBe(true);
    // A second later the same body is a new signature.
    expect((await send(app, signed('DescribeSession', key, timestamp + 1))).Session).toEqual(expect.objectContaining({ SessionId: key.SessionId }));
  });

  it('shares a signature taken by a write with nothing: a deleted session is not re-created or read with it', async () => {
    const key = await newSession(app);
    const timestamp = Math.floor(Date.now() / 1000);
    expect((await send(app, signed('DeleteSession', key, timestamp))).Error).toBeUndefined();
    await expectReplayRefused(() => send(app, signed('CreateSession', key, timestamp)));
    await expectReplayRefused(() => send(app, signed('DescribeSession', key, timestamp)));
    await expectReplayRefused(() => send(app, signed('DeleteSession', key, timestamp)));
    expect(await sessionExists(key.SessionId)).toBe(false);
  });

  it('records a signature only once it checks out: a tampered copy neither passes nor uses it up', async () => {
    const key = await newSession(app);
    const append = signed('AppendEvent', appendBody(key));
    const before = await tableFingerprints(database.db);
    // The captured signature over another body: it does not match, so it is not recorded.
    const tampered = { ...append, payload: JSON.stringify({ ...appendBody(key), Event: { Author: 'mallory' } }) };
    expect((await send(app, tampered)).Error?.Code).toBe('AuthFailure.SignatureFailure');
    const stale = signed('AppendEvent', appendBody(key), Math.floor(Date.now() / 1000) - 301);
    expect((await send(app, stale)).Error?.Code).toBe('AuthFailure.SignatureExpire');
    expect(changedTables(before, await tableFingerprints(database.db))).toEqual([]);
    // The genuine request still goes through, once.
    expect((await send(app, append)).Error).toBeUndefined();
    await expectReplayRefused(() => send(app, append));
    expect(await eventCount(key.SessionId)).toBe(1);
  });
});

describe('two instances sharing Redis', () => {
  let a: FastifyInstance;
  let b: FastifyInstance;
  beforeAll(async () => {
    [a, b] = await Promise.all([instance(SHARED_REDIS_URL), instance(SHARED_REDIS_URL)]);
  });

  it('refuses through one instance a signature the other accepted: the repeat and the action swap', async () => {
    const key = await newSession(a);
    const append = signed('AppendEvent', appendBody(key));
    expect((await send(a, append)).Error).toBeUndefined();
    await expectReplayRefused(() => send(b, append));
    await expectReplayRefused(() => send(a, append));
    expect(await eventCount(key.SessionId)).toBe(1);

    const describe = signed('DescribeSession', key);
    expect((await send(b, describe)).Error).toBeUndefined();
    await expectReplayRefused(() => send(a, describe, 'DeleteSession'));
    expect(await sessionExists(key.SessionId)).toBe(true);

    // A read and CreateSession share a signature across instances too; a write after them does not.
    const fresh = { SpaceId: account.defaultSpaceId, UserId: 'u', SessionId: `get-or-create-2-${process.pid}` };
    const timestamp = Math.floor(Date.now() / 1000);
    expect((await send(a, signed('DescribeSession', fresh, timestamp))).Error?.Code).toBe('ResourceNotFound.Session');
    expect((await send(b, signed('CreateSession', fresh, timestamp))).Error).toBeUndefined();
    await expectReplayRefused(() => send(a, signed('CreateSession', fresh, timestamp)));
    await expectReplayRefused(() => send(b, signed('DeleteSession', fresh, timestamp)));
    expect(await sessionExists(fresh.SessionId)).toBe(true);

    // One key per signature under this deployment's prefix, kept until the timestamp's window has
    // closed everywhere (300 s, plus 60 for instance clocks behind this one), and no longer.
    const ttl = await inspector.ttl(`${PREFIX}tc3-signature:${append.signature}`);
    expect(ttl).toBeGreaterThan(300);
    expect(ttl).toBeLessThanOrEqual(360);
    expect(await inspector.exists(`${PREFIX}tc3-signature:${describe.signature}`)).toBe(1);
  });

  it('lets exactly one of eight simultaneous copies through, spread over both instances', async () => {
    const key = await newSession(b);
    const append = signed('AppendEvent', appendBody(key));
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => send(i % 2 ? a : b, append)));
    expect(answers.filter((answer) => answer.Error === undefined)).toHaveLength(1);
    expect(answers.filter((answer) => answer.Error?.Code === 'AuthFailure.SignatureFailure')).toHaveLength(7);
    expect(await eventCount(key.SessionId)).toBe(1);
  });

  it('of one signature sent at once as a read on one instance and a delete on the other, lets exactly one through', async () => {
    for (let round = 0; round < 8; round++) {
      const key = await newSession(round % 2 ? a : b);
      const timestamp = Math.floor(Date.now() / 1000);
      const [read, erase] = await Promise.all([send(round % 2 ? a : b, signed('DescribeSession', key, timestamp)), send(round % 2 ? b : a, signed('DeleteSession', key, timestamp))]);
      const refused = [read, erase].filter((answer) => answer.Error?.Code === 'AuthFailure.SignatureFailure');
      expect(refused).toHaveLength(1);
      expect(await sessionExists(key.SessionId)).toBe(erase === refused[0]);
    }
  });

  it('does not record a signature that fails its check', async () => {
    const key = await newSession(a);
    const { secretId } = account.rootCredential;
    const forged = signed('AppendEvent', appendBody(key));
    const wrongKey = sign3({ method: 'POST', url: 'http://localhost/', payload: appendBody(key), timestamp: Number(forged.headers['x-tc-timestamp']), service: 'ags', secretId, secretKey: 'not-the-key', headers: { 'Content-Type': 'application/json' } });
    const answer = await send(b, { ...forged, headers: { ...forged.headers, authorization: wrongKey } });
    expect(answer.Error?.Code).toBe('AuthFailure.SignatureFailure');
    expect(answer.Error?.Message).not.toContain('already used');
    expect(await inspector.exists(`${PREFIX}tc3-signature:${/Signature=([0-9a-f]{64})/.exec(wrongKey)![1]}`)).toBe(0);
    expect(await eventCount(key.SessionId)).toBe(0);
  });

  it('serves the official SDK on both instances, each call signed anew', async () => {
    const key = await newSession(a);
    const clients = [sdkClient(await listenOnLoopback(a), account.rootCredential, { paced: false }), sdkClient(await listenOnLoopback(b), account.rootCredential, { paced: false })];
    // Distinct bodies: the SDK signs each call with the time of the call, in whole seconds.
    for (let i = 0; i < 6; i++) {
      const answer = (await clients[i % 2]!.request('AppendEvent', { ...key, Event: { Author: 'agent', Content: { Parts: [{ Text: `turn ${i}` }] } } })) as Fields;
      expect(answer.Event).toEqual(expect.objectContaining({ EventId: expect.any(String) }));
    }
    const listed = (await clients[1]!.request('DescribeEvents', { ...key, Limit: 10 })) as { TotalCount: number };
    expect(listed.TotalCount).toBe(6);
  });
});

describe('an instance whose Redis goes away', () => {
  it('still refuses a repeat through itself, from its own record', { timeout: 30_000 }, async () => {
    privateRedis = await createPrivateRedis();
    await privateRedis.start();
    const app = await instance(privateRedis.url);
    const key = await newSession(app);
    const before = signed('AppendEvent', appendBody(key));
    expect((await send(app, before)).Error).toBeUndefined();
    await privateRedis.kill();
    // Accepted while Redis was there, and one accepted during the outage: both refused again.
    await expectReplayRefused(() => send(app, before));
    const during = signed('AppendEvent', { ...appendBody(key), Event: { Author: 'agent', Content: { Parts: [{ Text: 'during' }] } } });
    expect((await send(app, during)).Error).toBeUndefined();
    await expectReplayRefused(() => send(app, during));
    expect(await eventCount(key.SessionId)).toBe(2);
  });
});
