// Request bodies with a content coding (Content-Encoding: gzip, br…): the service decodes none, so
// it refuses them with 415 UnsupportedMediaType (RFC 9110 §8.4) before reading them, on every route
// that takes a body and on the API 3.0 endpoint, and writes nothing. `identity` is no coding.
import { createRequire } from 'node:module';
import { randomUUID } from 'node:crypto';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

type Sign3 = (options: Record<string, unknown>) => string;
const sign3 = (createRequire(import.meta.url)('tencentcloud-sdk-nodejs-common/tencentcloud/common/sign.js') as { default: { sign3: Sign3 } }).default.sign3;

let t: TestApp;
const USER = 'encoding-user';
beforeAll(async () => {
  // A master key: the root credential can then sign API 3.0 requests.
  t = await createTestApp({ credentialMasterKey: Buffer.alloc(32, 5) });
});
afterAll(async () => t?.close());

const NO_CODING = 'request bodies must not be encoded: send them uncompressed (Content-Encoding: identity or none)';
const eventBody = JSON.stringify({ author: 'agent', content: { parts: [{ text: 'compressed?' }] } });

async function newSession(): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
  return sessionId;
}
const sessionUrl = (sessionId: string) => `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}`;

async function eventCount(sessionId: string): Promise<number> {
  const res = await t.request({ method: 'GET', url: sessionUrl(sessionId) });
  expect(res.statusCode).toBe(200);
  return res.json().eventCount as number;
}

function appendEvent(sessionId: string, payload: string | Buffer, contentEncoding: string) {
  return t.request({ method: 'POST', url: `${sessionUrl(sessionId)}/events`, payload, headers: { 'content-type': 'application/json', 'content-encoding': contentEncoding } });
}

/** Expects the 415 envelope naming the coding and the content-encoding field. */
function expectRefused(res: Awaited<ReturnType<TestApp['request']>>, coding: string) {
  expect(res.statusCode, res.body).toBe(415);
  expect(res.headers['accept-encoding']).toBe('identity');
  expect(res.json()).toEqual({
    error: {
      code: 'UnsupportedMediaType',
      message: `The body's content coding "${coding}" is not supported: send the body uncompressed (Content-Encoding: identity, or none).`,
      requestId: expect.any(String),
      details: { issues: [{ field: 'content-encoding', message: NO_CODING }] },
    },
  });
}

describe('REST routes', () => {
  it.each([
    ['gzip, with a gzip body', 'gzip', gzipSync(eventBody), 'gzip'],
    ['GZIP, any case', 'GZIP', gzipSync(eventBody), 'gzip'],
    ['br, with a plain body that would parse', 'br', eventBody, 'br'],
    ['br, with a br body', 'br', brotliCompressSync(eventBody), 'br'],
    ['deflate', 'deflate', eventBody, 'deflate'],
    ['a list with identity: gzip, identity', 'gzip, identity', gzipSync(eventBody), 'gzip'],
    ['a list ending in a coding: identity, br', 'identity, br', eventBody, 'br'],
  ])('refuses an append with Content-Encoding %s: 415 naming content-encoding, nothing stored', async (_what, header, payload, coding) => {
    const sessionId = await newSession();
    const before = await tableFingerprints(t.db);
    expectRefused(await appendEvent(sessionId, payload, header), coding);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
    expect(await eventCount(sessionId)).toBe(0);
  });

  it('refuses encoded bodies on other routes too: a space, a session, a YAML import', async () => {
    const before = await tableFingerprints(t.db);
    const json = { 'content-type': 'application/json', 'content-encoding': 'gzip' };
    expectRefused(await t.request({ method: 'POST', url: '/v1/spaces', payload: gzipSync('{"name":"gz"}'), headers: json }), 'gzip');
    expectRefused(await t.request({ method: 'POST', url: `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions`, payload: '{}', headers: { ...json, 'content-encoding': 'br' } }), 'br');
    const yaml = { 'content-type': 'application/yaml', 'content-encoding': 'gzip' };
    expectRefused(await t.request({ method: 'POST', url: `/v1/spaces/${t.account.defaultSpaceId}/sessions/import`, payload: gzipSync('a: 1\n'), headers: yaml }), 'gzip');
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it.each(['identity', 'IDENTITY', 'identity, identity'])('takes Content-Encoding: %s as no coding (201, stored)', async (header) => {
    const sessionId = await newSession();
    const res = await appendEvent(sessionId, eventBody, header);
    expect(res.statusCode, res.body).toBe(201);
    expect(await eventCount(sessionId)).toBe(1);
  });

  it('ignores Content-Encoding on a request without a body', async () => {
    const sessionId = await newSession();
    const res = await t.request({ method: 'GET', url: sessionUrl(sessionId), headers: { 'content-encoding': 'gzip' } });
    expect(res.statusCode, res.body).toBe(200);
  });
});

describe('the API 3.0 endpoint', () => {
  /** AppendEvent signed as the SDK signs it; the answer's Response. */
  async function signedAppend(sessionId: string, text: string, contentEncoding: string, encode: (body: string) => string | Buffer = (body) => body) {
    const { secretId, secretKey } = t.account.rootCredential;
    const body = { SpaceId: t.account.defaultSpaceId, UserId: USER, SessionId: sessionId, Event: { Author: 'agent', Content: { Role: 'model', Parts: [{ Text: text }] } } };
    const timestamp = Math.floor(Date.now() / 1000);
    const authorization = sign3({ method: 'POST', url: 'http://localhost/', payload: body, timestamp, service: 'ags', secretId, secretKey, headers: { 'Content-Type': 'application/json' } });
    const res = await t.app.inject({
      method: 'POST',
      url: '/',
      headers: {
        'content-type': 'application/json',
        'content-encoding': contentEncoding,
        authorization,
        'x-tc-action': 'AppendEvent',
        'x-tc-version': '2025-09-20',
        'x-tc-timestamp': String(timestamp),
      },
      payload: encode(JSON.stringify(body)),
    });
    // Every API 3.0 answer is HTTP 200; the error is in the envelope.
    expect(res.statusCode).toBe(200);
    return (res.json() as { Response: { Error?: { Code: string; Message: string } } }).Response;
  }

  it.each([
    ['gzip, with a gzip body', 'gzip', gzipSync, 'gzip'],
    ['br, with a plain body that would parse and verify', 'br', undefined, 'br'],
  ])('refuses AppendEvent with Content-Encoding %s as InvalidParameter naming the coding, nothing stored', async (_what, header, encode, coding) => {
    const sessionId = await newSession();
    const before = await tableFingerprints(t.db);
    const answer = await signedAppend(sessionId, `refused ${header}`, header, encode);
    expect(answer.Error).toEqual({ Code: 'InvalidParameter', Message: expect.stringContaining(`content coding "${coding}" is not supported`) });
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
    expect(await eventCount(sessionId)).toBe(0);
  });

  it('takes Content-Encoding: identity', async () => {
    const sessionId = await newSession();
    const answer = await signedAppend(sessionId, 'identity', 'identity');
    expect(answer.Error).toBeUndefined();
    expect(await eventCount(sessionId)).toBe(1);
  });
});
