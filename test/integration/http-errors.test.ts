// Bodies that are not what the API takes are clear 4xx answers in the error envelope, never a 500,
// and they write nothing. Exercised on `POST /v1/spaces`, the simplest route with a body.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
