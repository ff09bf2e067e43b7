// Issue 10: a page token is signed with the server's key. A client that rebuilds a token (the old
// scheme's check value was a plain SHA-256 of the token's own contents) gets a 400, and a token
// signed with the key but carrying a cursor of the wrong type is a 400 too, never a cast error in
// PostgreSQL logged as a 500.
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalJson } from '../../src/lib/canonical-json.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, TEST_PAGE_TOKEN_KEY, type TestApp } from '../support/test-app.js';

let t: TestApp;
let logged: string[] = [];
beforeAll(async () => {
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      logged.push(chunk.toString());
      done();
    },
  });
  t = await createTestApp({ logger: pino({ level: 'info' }, stream) });
});
afterAll(async () => t.close());

const errorLines = () =>
  logged
    .join('')
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { level: number; msg: string })
    .filter((line) => line.level >= 50);

const tokenBody = (token: string) => JSON.parse(Buffer.from(token, 'base64url').toString('utf8')) as { q: string; p: unknown[] };
const encode = (body: object) => Buffer.from(JSON.stringify(body)).toString('base64url');

/** What a client could always build: the old scheme's check value, from the token's own contents. */
const unsigned = (q: string, p: unknown[]) =>
  encode({ q, p, c: createHash('sha256').update(`${q}|${canonicalJson(p)}`).digest().subarray(0, 8).toString('base64url') });
/** A token signed with the server's key, as only the server (or this test) can build. */
const signed = (q: string, p: unknown[]) =>
  encode({ q, p, s: createHmac('sha256', TEST_PAGE_TOKEN_KEY).update(`${q}|${canonicalJson(p)}`).digest().subarray(0, 16).toString('base64url') });

const USER = 'forgery-user';
let sessionId: string;
const sessionsUrl = () => `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions?pageSize=1`;
const spaceSessionsUrl = () => `/v1/spaces/${t.account.defaultSpaceId}/sessions?pageSize=1`;
const eventsUrl = () => `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}/events?pageSize=1`;
const spacesUrl = () => '/v1/spaces?pageSize=1';
const usersUrl = () => `/v1/spaces/${t.account.defaultSpaceId}/users?pageSize=1`;

beforeAll(async () => {
  for (let n = 0; n < 3; n++) {
    await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: n === 0 ? USER : `${USER}-${n}`, sessionId: `s-${randomUUID()}` });
  }
  sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
  const res = await t.request({ method: 'POST', url: eventsUrl().split('?')[0]!, payload: { events: [{ author: 'user' }, { author: 'agent' }, { author: 'user' }] } });
  expect(res.statusCode).toBe(201);
  for (let n = 0; n < 2; n++) expect((await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: `forgery ${n}` } })).statusCode).toBe(201);
});

/** The fingerprint `q` of a real token of `url`, so that a forged token fails on its signature or cursor only. */
async function issuedToken(url: string): Promise<{ q: string; p: unknown[] }> {
  const res = await t.request({ method: 'GET', url });
  expect(res.statusCode).toBe(200);
  const token = res.json().nextPageToken as string;
  expect(token).toEqual(expect.any(String));
  return tokenBody(token);
}

async function expectPageTokenRefused(url: string, token: string): Promise<void> {
  logged = [];
  const res = await t.request({ method: 'GET', url: `${url}&pageToken=${token}` });
  expect(res.statusCode).toBe(400);
  expect(res.json().error.code).toBe('InvalidParameter.PageToken');
  expect(res.json().error.details).toEqual({ issues: [{ field: 'pageToken', message: expect.any(String) }] });
  expect(errorLines()).toEqual([]);
}

describe('page tokens are signed', () => {
  it.each([
    ['a user\'s sessions', sessionsUrl],
    ['a space\'s sessions', spaceSessionsUrl],
    ['events', eventsUrl],
    ['spaces', spacesUrl],
    ['space users', usersUrl],
  ])('refuses a token of %s forged with the old plain SHA-256 check value', async (_list, url) => {
    const { q, p } = await issuedToken(url());
    // The issued content re-signed the old way: only the signature differs from a genuine token.
    await expectPageTokenRefused(url(), unsigned(q, p));
    // …and the genuine content, signed with the key, is accepted (the test builds tokens right).
    expect((await t.request({ method: 'GET', url: `${url()}&pageToken=${signed(q, p)}` })).statusCode).toBe(200);
  });

  it.each([
    ['a user\'s sessions', sessionsUrl, ['1', 'a', 'b']],
    ['a user\'s sessions', sessionsUrl, ['Tue Dec 01 2026', 'a', 'b']],
    ['a user\'s sessions', sessionsUrl, ['2026-12-01T00:00:00.000Z', 1, 'b']],
    ['a space\'s sessions', spaceSessionsUrl, ['1', 'a', 'b']],
    ['a space\'s sessions', spaceSessionsUrl, ['+275760-09-13T00:00:00.000Z', 'a']],
    ['events', eventsUrl, [-1]],
    ['events', eventsUrl, ['x']],
    ['events', eventsUrl, [1.5]],
    ['events', eventsUrl, [2 ** 53]],
    ['spaces', spacesUrl, ['Tue Dec 01 2026', 'a']],
    ['spaces', spacesUrl, ['2026-12-01T00:00:00.000Z', 5]],
    ['space users', usersUrl, [5]],
  ])('refuses a correctly signed token of %s carrying the cursor %j, logging nothing at error level', async (_list, url, cursor) => {
    const { q } = await issuedToken(url());
    await expectPageTokenRefused(url(), signed(q, cursor));
  });
});
