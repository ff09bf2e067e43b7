// GET /metrics (docs/design.md §3, issue 5): Prometheus text with request counts and latencies by route
// template and status, the database pool, appends and state sizes, and the process.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { ConfigError, DEFAULT_LIMITS, loadConfig } from '../../src/config.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp, TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const EVENTS_ROUTE = '/v1/spaces/:spaceId/users/:userId/sessions/:sessionId/events';
const USER = `metrics-user-${randomUUID()}`;

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

// Prometheus reads values with Go's ParseFloat, which takes NaN and Inf in any case: prom-client
// writes `Nan` (the event-loop lag before its first sample).
const SAMPLE_LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (-?[0-9.e+-]+|nan|[+-]inf)$/i;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"(?:,|$)/gy;

/** Parses the text exposition format strictly: every line is a comment or a sample. */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || /^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$/.test(line)) continue;
    const match = SAMPLE_LINE.exec(line);
    if (!match) throw new Error(`not a Prometheus text line: ${line}`);
    const labels: Record<string, string> = {};
    const body = match[2] ?? '';
    LABEL.lastIndex = 0;
    let consumed = 0;
    for (let label = LABEL.exec(body); label; label = LABEL.exec(body)) {
      labels[label[1]!] = label[2]!;
      consumed = LABEL.lastIndex;
    }
    if (consumed !== body.length) throw new Error(`malformed labels: ${line}`);
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the sample with exactly these labels; 0 when absent (a counter not yet touched). */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const wanted = JSON.stringify(Object.entries(labels).sort());
  const found = samples.find((s) => s.name === name && JSON.stringify(Object.entries(s.labels).sort()) === wanted);
  return found?.value ?? 0;
}

async function scrape(app: FastifyInstance = t.app, headers: Record<string, string> = {}) {
  const res = await app.inject({ method: 'GET', url: '/metrics', headers });
  expect(res.statusCode).toBe(200);
  expect(res.headers['content-type']).toBe('text/plain; version=0.0.4; charset=utf-8');
  return { text: res.body, samples: parse(res.body) };
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

    const moved = (name: string, labels: Record<string, string> = {}) => value(after, name, labels) - value(before, name, labels);
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
    expect(value(afterAppend, 'events_appended_total') - value(before, 'events_appended_total')).toBe(2);
    expect(moved('events_appended_total')).toBe(3); // 2 + the new event of the mixed batch
    expect(moved('events_replayed_total')).toBe(3); // 2 of the pure replay + 1 in the mixed batch
    expect(moved('state_delta_bytes_total')).toBe(bytes({ a: 'x' }) + bytes({ b: 2 }) + bytes({ n: 3, 'user:pref': 'dark' }));

    // Observed after each writing append, for each scope its deltas touched.
    const stateMoved = (samples: Sample[], suffix: string, scope: string) =>
      value(samples, `state_size_bytes_${suffix}`, { scope }) - value(before, `state_size_bytes_${suffix}`, { scope });
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
      expect(value(samples, 'db_pool_max_connections')).toBe(max);
      expect(value(samples, 'db_pool_connections_in_use')).toBeGreaterThanOrEqual(1);
      expect(value(samples, 'db_pool_connections_in_use') + value(samples, 'db_pool_connections_idle')).toBe(value(samples, 'db_pool_connections'));
      expect(value(samples, 'db_pool_connections')).toBeLessThanOrEqual(max);
      expect(value(samples, 'db_pool_waiting_clients')).toBe(0);
    } finally {
      held.release();
    }
    const { samples } = await scrape();
    expect(value(samples, 'db_pool_connections_in_use')).toBe(0);
    expect(value(samples, 'db_pool_connections_idle')).toBeGreaterThanOrEqual(1);
  });

  it('includes the process metrics', async () => {
    const { samples, text } = await scrape();
    expect(value(samples, 'process_resident_memory_bytes')).toBeGreaterThan(0);
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
    expect(value(again, 'http_requests_total', { method: 'GET', route: '/healthz', status: '200' })).toBe(1);
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
