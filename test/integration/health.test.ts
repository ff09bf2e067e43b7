import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

describe('health and basics', () => {
  it('answers liveness and readiness without a credential', async () => {
    const live = await t.request({ method: 'GET', url: '/healthz', token: null });
    expect(live.statusCode).toBe(200);
    expect(live.json()).toEqual({ status: 'ok' });
    const ready = await t.request({ method: 'GET', url: '/readyz', token: null });
    expect(ready.statusCode).toBe(200);
    expect(ready.json()).toEqual({ status: 'ready' });
  });

  it('echoes a well-formed X-Request-Id and generates one otherwise', async () => {
    const echoed = await t.request({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'trace-123' } });
    expect(echoed.headers['x-request-id']).toBe('trace-123');
    const generated = await t.request({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'bad id with spaces' } });
    expect(generated.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('answers an unknown route with the error envelope', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/nothing-here' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ error: { code: 'ResourceNotFound.Route', message: expect.any(String), requestId: res.headers['x-request-id'] } });
  });

  it('serves the OpenAPI document', async () => {
    const res = await t.request({ method: 'GET', url: '/openapi.json', token: null });
    expect(res.statusCode).toBe(200);
    expect(res.json().openapi).toBe('3.1.0');
  });
});
