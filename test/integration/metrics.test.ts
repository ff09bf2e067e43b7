// GET /metrics (docs/design.md §3, issue 5): Prometheus text with request counts and latencies by route
// template and status, the database pool, appends and state sizes, and the process.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError, DEFAULT_LIMITS, loadConfig } from '../../src/config.js';
import { insertSession } from '../support/fixtures.js';
import { type Sample, parsePrometheusText, sampleValue } from '../support/prometheus-text.js';
import { createTestApp, type TestApp, TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const EVENTS_ROUTE = '/v1/spaces/:spaceId/users/:userId/sessions/:sessionId/events';
const USER = `metrics-user-${randomUUID()}`;

async function scrape(app: FastifyInstance = t.app, headers: Record<string, string> = {}) {
  const res = await app.inject({ method: 'GET', url: '/metrics', headers });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return { text: res.body, samples: parsePrometheusText(res.body) };
}

const bytes = (value: unknown) => Buffer.byteLength(JSON.stringify(value), 'utf8');
// A state's size is counted as PostgreSQL writes the jsonb (a space after each ':' and ','),
// written out here by hand.
const storedBytes = (text: string) => Buffer.byteLength(text, 'utf8');

describe('GET /metrics', () => {
  it('counts requests by route template and status, appends without replays, and state sizes', async () => {
    const sessionId = `metrics-session-${randomUUID()}`;
    const spaceId = t.account.defaultSpaceId;
    await insertSession(t.db, { accountId: t.account.accountId, spaceId, userId: USER, sessionId });
    const url = `/v1/spaces/${spaceId}/users/${USER}/sessions/${sessionId}/events`;
    const [first, second, third] = [randomUUID(), randomUUID(), randomUUID()];
    const pair = {
      events: [
        { eventId: first, author: 'user', actions: { stateDelta: { a: 'x' } } },
        { eventId: second, author: 'agent', actions: { stateDelta: { b: 2 } } },
      ],
    };
    const before = (await scrape()).samples;

    expect((await t.request({ method: 'POST', url, payload: pair })).statusCode).toBe(201);
    const afterAppend = (await scrape()).samples;
    expect((await t.request({ method: 'POST', url, payload: pair })).statusCode).toBe(200); // a pure replay
    // A batch mixing a replay with a new event that touches the session and the user scope.
    const mixed = { events: [pair.events[1], { eventId: third, author: 'user', actions: { stateDelta: { n: 3, 'user:pref': 'dark' } } }] };
    expect((await t.request({ method: 'POST', url, payload: mixed })).statusCode).toBe(201);
    const invalid = await t.request({ method: 'POST', url, payload: { author: 42 } });
    expect(invalid.statusCode).toBe(400);
    const missingSession = await t.request({ method: 'POST', url: url.replace(sessionId, `${sessionId}-gone`), payload: { author: 'user' } });
    expect(missingSession.json().error.code).toBe('ResourceNotFound.Session');
    const unmatched = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/nothing/${sessionId}` });
    expect(unmatched.statusCode).toBe(404);
    const { text, samples: after } = await scrape();

    const moved = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    const post = (status: number) => ({ method: 'POST', route: EVENTS_ROUTE, status: String(status) });
    expect(moved('http_requests_total', post(201))).toBe(2);
    expect(moved('http_requests_total', post(200))).toBe(1);
    expect(moved('http_requests_total', post(400))).toBe(1);
    expect(moved('http_requests_total', post(404))).toBe(1);
    expect(moved('http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    for (const status of [201, 200, 400, 404]) {
      expect(moved('http_request_duration_seconds_count', post(status))).toBe(moved('http_requests_total', post(status)));
      expect(moved('http_request_duration_seconds_bucket', { ...post(status), le: '+Inf' })).toBe(moved('http_requests_total', post(status)));
    }
    expect(moved('http_request_duration_seconds_sum', post(201))).toBeGreaterThan(0);

    // Labels are templates: no id from any URL or body.
    for (const id of [USER, sessionId, spaceId, t.account.accountId, first, second, third]) expect(text).not.toContain(id);
    // The scrapes themselves are not counted.
    expect(after.some((s) => s.labels.route === '/metrics')).toBe(false);

    expect(moved('append_requests_total', { outcome: 'appended' })).toBe(2);
    expect(moved('append_requests_total', { outcome: 'replayed' })).toBe(1);
    expect(sampleValue(afterAppend, 'events_appended_total') - sampleValue(before, 'events_appended_total')).toBe(2);
    expect(moved('events_appended_total')).toBe(3); // 2 + the new event of the mixed batch
    expect(moved('events_replayed_total')).toBe(3); // 2 of the pure replay + 1 in the mixed batch
    expect(moved('state_delta_bytes_total')).toBe(bytes({ a: 'x' }) + bytes({ b: 2 }) + bytes({ n: 3, 'user:pref': 'dark' }));

    // Observed after each writing append, for each scope its deltas touched.
    const stateMoved = (samples: Sample[], suffix: string, scope: string) =>
      sampleValue(samples, `state_size_bytes_${suffix}`, { scope }) - sampleValue(before, `state_size_bytes_${suffix}`, { scope });
    expect(stateMoved(afterAppend, 'count', 'session')).toBe(1);
    expect(stateMoved(afterAppend, 'sum', 'session')).toBe(storedBytes('{"a": "x", "b": 2}'));
    expect(stateMoved(after, 'count', 'session')).toBe(2);
    expect(stateMoved(after, 'sum', 'session')).toBe(storedBytes('{"a": "x", "b": 2}') + storedBytes('{"a": "x", "b": 2, "n": 3}'));
    expect(stateMoved(after, 'count', 'user')).toBe(1);
    expect(stateMoved(after, 'sum', 'user')).toBe(storedBytes('{"user:pref": "dark"}'));
    expect(stateMoved(after, 'count', 'app')).toBe(0);
  });

  it('reads the database pool when scraped', async () => {
    const max = t.database.pool.options.max;
    const held = await t.database.pool.connect();
    try {
      const { samples } = await scrape();
      expect(sampleValue(samples, 'db_pool_max_connections')).toBe(max);
      expect(sampleValue(samples, 'db_pool_connections_in_use')).toBeGreaterThanOrEqual(1);
      expect(sampleValue(samples, 'db_pool_connections_in_use') + sampleValue(samples, 'db_pool_connections_idle')).toBe(sampleValue(samples, 'db_pool_connections'));
      expect(sampleValue(samples, 'db_pool_connections')).toBeLessThanOrEqual(max);
      expect(sampleValue(samples, 'db_pool_waiting_clients')).toBe(0);
    } finally {
      held.release();
    }
    const { samples } = await scrape();
    expect(sampleValue(samples, 'db_pool_connections_in_use')).toBe(0);
    expect(sampleValue(samples, 'db_pool_connections_idle')).toBeGreaterThanOrEqual(1);
  });

  it('includes the process metrics', async () => {
    const { samples, text } = await scrape();
    expect(sampleValue(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(text).toContain('# TYPE nodejs_eventloop_lag_seconds gauge');
    expect(text).toContain('# TYPE nodejs_gc_duration_seconds histogram');
    expect(text).toContain('# TYPE http_request_duration_seconds histogram');
  });

  it('needs no credential by default', async () => {
    const res = await t.request({ method: 'GET', url: '/metrics', token: null });
    expect(res.statusCode).toBe(200);
  });
});

describe('a second app in the same process', () => {
  const TOKEN = `metrics-token-${randomUUID()}`;
  let other: FastifyInstance;
  beforeAll(async () => {
    other = await buildApp({ db: t.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS, metricsToken: TOKEN });
    await other.ready();
  });
  afterAll(async () => other.close());

  it('has its own counts, and no pool gauges without a pool', async () => {
    await t.request({ method: 'GET', url: '/healthz' });
    const { samples } = await scrape(other, { authorization: `Bearer ${TOKEN}` });
    expect(samples.filter((s) => s.name === 'http_requests_total')).toEqual([]);
    expect(samples.some((s) => s.name.startsWith('db_pool_'))).toBe(false);
    await other.inject({ method: 'GET', url: '/healthz' });
    const again = (await scrape(other, { authorization: `Bearer ${TOKEN}` })).samples;
    expect(sampleValue(again, 'http_requests_total', { method: 'GET', route: '/healthz', status: '200' })).toBe(1);
  });

  it('with METRICS_TOKEN, refuses a scrape without the token', async () => {
    for (const authorization of [undefined, 'Bearer wrong', TOKEN, `Bearer ${TOKEN}x`]) {
      const res = await other.inject({ method: 'GET', url: '/metrics', headers: authorization ? { authorization } : {} });
      expect(res.statusCode).toBe(401);
      expect(res.json().error.code).toBe('AuthFailure');
      expect(res.body).not.toContain('http_requests_total');
    }
  });

  it('reads METRICS_TOKEN from the environment, at least 16 characters', () => {
    expect(loadConfig({ METRICS_TOKEN: TOKEN }).metricsToken).toBe(TOKEN);
    expect(loadConfig({}).metricsToken).toBeUndefined();
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(ConfigError);
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(/METRICS_TOKEN: must be at least 16 characters/);
  });
});
