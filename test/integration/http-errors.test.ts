// Bodies that are not what the API takes are clear 4xx answers in the error envelope, never a 500,
// and they write nothing. Exercised on `POST /v1/spaces`, the simplest route with a body.
import Fastify, { type LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNSTORABLE_VALUE_MESSAGE, registerErrorHandling } from '../../src/http/error-handler.js';
import { tableFingerprints } from '../support/db-snapshot.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let small: TestApp; // the same API with a 1 KiB body limit
beforeAll(async () => {
  [t, small] = await Promise.all([createTestApp(), createTestApp({ limits: { bodyBytes: 1024 } })]);
});
afterAll(async () => Promise.all([t?.close(), small?.close()]));

async function spaceCount(app: TestApp): Promise<number> {
  const row = await app.db
    .selectFrom('session_spaces')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', app.account.accountId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}

/** Sends a raw body to POST /v1/spaces and checks the envelope, the code and that nothing was written. */
async function postSpaceRaw(
  app: TestApp,
  payload: string,
  contentType: string | undefined,
  expected: { status: number; code: string },
) {
  const before = await spaceCount(app);
  const res = await app.request({
    method: 'POST',
    url: '/v1/spaces',
    payload,
    headers: contentType === undefined ? {} : { 'content-type': contentType },
  });
  expect(res.statusCode).toBe(expected.status);
  const body = res.json();
  expect(body.error).toMatchObject({ code: expected.code, message: expect.any(String), requestId: res.headers['x-request-id'] });
  expect(await spaceCount(app)).toBe(before);
  return body.error as { code: string; message: string; details?: { issues?: { field: string; message: string }[] } };
}

const JSON_TYPE = 'application/json';

describe('HTTP errors on a request body', () => {
  it('creates a space from a good body (the baseline for the cases below)', async () => {
    const before = await spaceCount(t);
    const res = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'x' } });
    expect(res.statusCode).toBe(201);
    expect(await spaceCount(t)).toBe(before + 1);
  });

  it('answers malformed JSON with 400 InvalidParameter', async () => {
    const error = await postSpaceRaw(t, '{"name": "x",', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    expect(error.details?.issues).toEqual([{ field: 'body', message: expect.any(String) }]);
  });

  it('answers a text/plain body with 415 UnsupportedMediaType', async () => {
    const error = await postSpaceRaw(t, '{"name":"x"}', 'text/plain', { status: 415, code: 'UnsupportedMediaType' });
    expect(error.message).toContain('application/json');
  });

  it.each(['application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x'])(
    'answers a %s body with 415 UnsupportedMediaType',
    async (contentType) => {
      await postSpaceRaw(t, 'name=x', contentType, { status: 415, code: 'UnsupportedMediaType' });
    },
  );

  it('accepts JSON with a charset parameter', async () => {
    const res = await t.request({ method: 'POST', url: '/v1/spaces', payload: '{"name":"charset"}', headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(res.statusCode).toBe(201);
  });

  it('answers a body over the limit with 413 LimitExceeded.RequestSize', async () => {
    const payload = JSON.stringify({ name: 'x', description: 'd'.repeat(2000) });
    const error = await postSpaceRaw(small, payload, JSON_TYPE, { status: 413, code: 'LimitExceeded.RequestSize' });
    expect(error.message).toContain('1024');
  });

  it('takes a body just under the limit', async () => {
    const payload = JSON.stringify({ name: 'x', description: 'd'.repeat(500) });
    expect((await small.request({ method: 'POST', url: '/v1/spaces', payload, headers: { 'content-type': JSON_TYPE } })).statusCode).toBe(201);
  });

  it('answers an unknown field with 400 InvalidParameter naming it', async () => {
    const error = await postSpaceRaw(t, JSON.stringify({ name: 'x', colour: 'blue' }), JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    expect(error.message).toContain('colour');
    expect(JSON.stringify(error.details)).toContain('colour');
  });

  it('answers an empty body declared as JSON with 400 InvalidParameter', async () => {
    const error = await postSpaceRaw(t, '', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    expect(error.details?.issues).toEqual([{ field: 'body', message: expect.any(String) }]);
  });

  it('answers a request with no body at all with 400', async () => {
    const before = await spaceCount(t);
    const res = await t.request({ method: 'POST', url: '/v1/spaces' });
    expect(res.statusCode).toBe(400);
    expect(['InvalidParameter', 'MissingParameter']).toContain(res.json().error.code);
    expect(await spaceCount(t)).toBe(before);
  });

  it('answers an empty JSON object with 400 MissingParameter naming the required field', async () => {
    const error = await postSpaceRaw(t, '{}', JSON_TYPE, { status: 400, code: 'MissingParameter' });
    expect(error.details?.issues).toEqual([{ field: 'name', message: expect.any(String) }]);
  });

  it.each([
    ['a JSON array', '[{"name":"x"}]'],
    ['a JSON string', '"x"'],
    ['JSON null', 'null'],
  ])('answers %s with 400 InvalidParameter', async (_what, payload) => {
    await postSpaceRaw(t, payload, JSON_TYPE, { status: 400, code: 'InvalidParameter' });
  });

  it('answers a __proto__ key with 400 InvalidParameter', async () => {
    await postSpaceRaw(t, '{"name":"x","__proto__":{"admin":true}}', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    await postSpaceRaw(t, '{"name":"x","constructor":{"prototype":{"admin":true}}}', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    // A body with a key holding a backslash is read by readJson, not JSON.parse (lib/parse-json.ts):
    // the same refusals, and the same 400 for text that is not JSON.
    await postSpaceRaw(t, '{"name":"x","labels":{"a\\\\b":"1"},"__proto__":{"admin":true}}', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    await postSpaceRaw(t, '{"name":"x","x\\\\":{"constructor":{"prototype":{"admin":true}}}}', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    await postSpaceRaw(t, '{"name":"x","\\\\":1,}', JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('answers a body nested thousands of levels deep with 400 naming body, on any route', async () => {
    const deep = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000);
    const error = await postSpaceRaw(t, `{"name":"x","description":${deep}}`, JSON_TYPE, { status: 400, code: 'InvalidParameter' });
    expect(error.details?.issues).toEqual([{ field: 'body', message: expect.stringContaining('nested deeper') }]);

    const res = await t.request({
      method: 'POST',
      url: `/v1/spaces/${t.account.defaultSpaceId}/users/u1/sessions`,
      payload: `{"state":${deep}}`,
      headers: { 'content-type': JSON_TYPE },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
    const sessions = await t.db.selectFrom('sessions').select('session_id').where('account_id', '=', t.account.accountId).execute();
    expect(sessions).toEqual([]);
  });
});

// Regressions found by the property tests (test/property/request-fuzz.test.ts, issue 5). Each case
// answered 500, answered outside the envelope, or stored something that later reads failed on.
describe('HTTP errors found by the property tests', () => {
  const sessionsUrl = () => `/v1/spaces/${t.account.defaultSpaceId}/users/fuzz-regression/sessions`;

  /** Sends the request and checks: the status, the code, the field named, the envelope, and that nothing was written. */
  async function expectRefused(
    request: Parameters<TestApp['request']>[0],
    expected: { status: number; code: string; field?: string },
  ): Promise<LightMyRequestResponse> {
    const before = await tableFingerprints(t.db);
    const res = await t.request(request);
    expect(res.statusCode, res.body).toBe(expected.status);
    const { error } = res.json();
    expect(error).toMatchObject({ code: expected.code, message: expect.any(String), requestId: res.headers['x-request-id'] });
    if (expected.field) expect(error.details.issues).toEqual([{ field: expected.field, message: expect.any(String) }]);
    expect(await tableFingerprints(t.db)).toEqual(before);
    return res;
  }

  beforeAll(async () => {
    const res = await t.request({ method: 'POST', url: sessionsUrl(), payload: { sessionId: 'target' } });
    expect(res.statusCode).toBe(201);
  });

  it.each([
    ['NUL in a field (was 500: PostgreSQL cannot store U+0000)', '/v1/spaces', '{"name":"a\\u0000b"}', 'name', 'U+0000'],
    ['NUL in an object key of the state', 'sessions', '{"sessionId":"nul-key","state":{"k\\u0000":1}}', 'state', 'U+0000'],
    ['NUL in a metadata value', 'sessions', '{"sessionId":"nul-meta","metadata":{"k":"v\\u0000"}}', 'metadata.k', 'U+0000'],
    ['an unpaired surrogate escape in event text (was 500: jsonb refuses it)', 'events', '{"author":"a","content":{"parts":[{"text":"x\\ud800"}]}}', 'content.parts[0].text', 'surrogate'],
    ['an unpaired low surrogate in a state delta key', 'events', '{"author":"a","actions":{"stateDelta":{"\\udc00":1}}}', 'actions.stateDelta', 'surrogate'],
  ])('refuses %s with 400 naming the field', async (_what, target, payload, field, rule) => {
    const url = target === 'sessions' ? sessionsUrl() : target === 'events' ? `${sessionsUrl()}/target/events` : target;
    const res = await expectRefused({ method: 'POST', url, payload, headers: { 'content-type': JSON_TYPE } }, { status: 400, code: 'InvalidParameter', field });
    expect(res.json().error.message).toContain(rule);
  });

  it('keeps text with paired surrogates (emoji) and other unicode as sent', async () => {
    const name = 'café 🦀 \u202e\ufeff x';
    const res = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name } });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().name).toBe(name);
  });

  it.each([
    ['a filter of the spaces list (was 500)', '/v1/spaces?name=a%00', 'name'],
    ['a substring filter', '/v1/spaces?nameLike=%00', 'nameLike'],
    ['a repeated metadata filter', () => `/v1/spaces/${t.account.defaultSpaceId}/sessions?metadata=k%3Dv&metadata=k%3Dv%00`, 'metadata[1]'],
  ])('refuses NUL in %s with 400 naming the parameter', async (_what, url, field) => {
    await expectRefused({ method: 'GET', url: typeof url === 'function' ? url() : url }, { status: 400, code: 'InvalidParameter', field });
  });

  it('ignores a query string a route does not take, whatever it holds', async () => {
    expect((await t.request({ method: 'GET', url: '/v1/iam/credentials?x=%00' })).statusCode).toBe(200);
  });

  it.each([
    ['a stray byte 0xFF', [0xff]],
    ['an overlong NUL (C0 80)', [0xc0, 0x80]],
    ['an encoded surrogate (ED A0 80)', [0xed, 0xa0, 0x80]],
    ['a truncated sequence', [0xe2, 0x82]],
  ])('refuses a body with %s (not UTF-8) instead of storing U+FFFD', async (_what, bytes) => {
    const payload = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from(bytes), Buffer.from('b"}')]);
    const res = await expectRefused({ method: 'POST', url: '/v1/spaces', payload, headers: { 'content-type': JSON_TYPE } }, { status: 400, code: 'InvalidParameter', field: 'body' });
    expect(res.json().error.message).toContain('UTF-8');
  });

  it.each([
    ['a percent-escape that does not decode (was Fastify\'s own format)', '/v1/spaces/%zz'],
    ['an escape of invalid UTF-8', '/v1/spaces/%C0%80'],
    ['a path parameter over the router\'s limit (was the whole URL as the message)', `/v1/spaces/${t?.account?.defaultSpaceId ?? 'x'}/users/${'a'.repeat(2000)}/sessions`],
  ])('answers %s with 400 in the envelope', async (_what, url) => {
    const res = await expectRefused({ method: 'GET', url }, { status: 400, code: 'InvalidParameter', field: 'path' });
    expect(res.json().error.message.length).toBeLessThan(200);
  });

  it.each([
    ['year 0', '0000-01-01T00:00:00Z'],
    ['year 0 once its offset is applied (was 500 after writing the event)', '0001-01-01T00:00:00+00:01'],
    ['year 10000 once its offset is applied (was 500 after writing the event)', '9999-12-31T23:59:59-00:01'],
  ])('refuses an event timestamp in %s', async (_what, timestamp) => {
    await expectRefused(
      { method: 'POST', url: `${sessionsUrl()}/target/events`, payload: { author: 'a', timestamp } },
      { status: 400, code: 'InvalidParameter', field: 'timestamp' },
    );
  });

  it('takes the first and last instants of years 1 to 9999, and reads them back', async () => {
    for (const timestamp of ['0001-01-01T00:00:00Z', '9999-12-31T23:59:59.999Z']) {
      const res = await t.request({ method: 'POST', url: `${sessionsUrl()}/target/events`, payload: { author: 'a', timestamp } });
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json().events[0].timestamp).toBe(new Date(timestamp).toISOString());
    }
    // A year-0 event stored earlier made every later read of its session fail (500).
    for (const read of ['context', 'export', 'events']) {
      expect((await t.request({ method: 'GET', url: `${sessionsUrl()}/target/${read}` })).statusCode).toBe(200);
    }
  });

  it("refuses a page token from another account's list, and a re-spelt token, with 400", async () => {
    const other = await t.createAccount();
    await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'second' }, token: other.rootCredential.token });
    const page = await t.request({ method: 'GET', url: '/v1/spaces?pageSize=1', token: other.rootCredential.token });
    const token = page.json().nextPageToken as string;
    expect(token).toBeDefined();
    // The same list and filters, but another account: it used to page through the caller's own spaces.
    await expectRefused({ method: 'GET', url: `/v1/spaces?pageSize=1&pageToken=${token}` }, { status: 400, code: 'InvalidParameter.PageToken', field: 'pageToken' });
    // The caller's own token with its JSON re-spelt (a space added): same content, other bytes.
    const own = (await t.request({ method: 'GET', url: '/v1/spaces?pageSize=1' })).json().nextPageToken as string;
    const respelt = Buffer.from(JSON.stringify(JSON.parse(Buffer.from(own, 'base64url').toString()), null, 1)).toString('base64url');
    await expectRefused({ method: 'GET', url: `/v1/spaces?pageSize=1&pageToken=${encodeURIComponent(respelt)}` }, { status: 400, code: 'InvalidParameter.PageToken' });
  });

  it('answers a value the database refuses as data (SQLSTATE class 22) with 400, not 500', async () => {
    // The backstop behind validation: a pg DatabaseError as the driver raises it.
    const app = Fastify();
    registerErrorHandling(app);
    app.get('/boom', async () => {
      throw Object.assign(new Error('invalid byte sequence for encoding "UTF8": 0x00'), { code: '22021', severity: 'ERROR' });
    });
    app.get('/bug', async () => {
      throw Object.assign(new Error('relation "x" does not exist'), { code: '42P01', severity: 'ERROR' });
    });
    const refused = await app.inject({ method: 'GET', url: '/boom' });
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toMatchObject({ code: 'InvalidParameter', message: UNSTORABLE_VALUE_MESSAGE });
    expect(refused.body).not.toContain('0x00'); // the database's message stays in the log
    expect((await app.inject({ method: 'GET', url: '/bug' })).statusCode).toBe(500);
    await app.close();
  });
});
