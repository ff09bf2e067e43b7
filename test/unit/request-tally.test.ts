// The request tally replaced a prom-client Counter and Histogram on every request (issue 24): a
// scraper must see what it saw before. prom-client itself, fed the same requests, is the reference.
import fc from 'fast-check';
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { expectPromClientExposition } from '../support/prom-client-parity.js';
import { registerRequestTally } from '../../src/lib/request-tally.js';

const NAMES = {
  counter: { name: 'http_requests_total', help: 'Requests.' },
  histogram: { name: 'http_request_duration_seconds', help: 'Durations.', buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5] },
};

interface Request {
  method: string;
  route: string;
  status: number;
  seconds: number;
}

/** What prom-client's own instruments expose for the same requests, as the hook fed them before. */
async function promClientText(requests: Request[]): Promise<string> {
  const registry = new Registry();
  const registers = [registry];
  const labelNames = ['method', 'route', 'status'] as const;
  const counter = new Counter({ ...NAMES.counter, labelNames, registers });
  const histogram = new Histogram({ ...NAMES.histogram, labelNames, registers });
  for (const { method, route, status, seconds } of requests) {
    const labels = { method, route, status: String(status) };
    counter.inc(labels);
    histogram.observe(labels, seconds);
  }
  return registry.metrics();
}

async function tallyText(requests: Request[]): Promise<string> {
  const registry = new Registry();
  const tally = registerRequestTally(registry, NAMES);
  for (const { method, route, status, seconds } of requests) tally.record(method, route, status, seconds);
  return registry.metrics();
}

const request = fc.record({
  method: fc.constantFrom('GET', 'POST', 'DELETE'),
  // A quote and a backslash need escaping in a label value; `unmatched` is what the hook names no route.
  route: fc.constantFrom('/v1/spaces/:spaceId/users/:userId/sessions/:sessionId/events', '/healthz', 'unmatched', '/odd/"quoted"\\path'),
  status: fc.constantFrom(200, 201, 400, 404, 503),
  // Exactly on a bound, between bounds, past the last, and zero.
  seconds: fc.oneof(fc.constantFrom(0, 0.001, 0.0025, 5, 5.000001, 12), fc.double({ min: 0, max: 10, noNaN: true })),
});

describe('the request tally', () => {
  it('exposes what prom-client exposes for the same requests, line for line', async () => {
    await expectPromClientExposition(request, tallyText, promClientText);
  });

  it('counts a request in the first bucket that holds it and in every one above', async () => {
    const text = await tallyText([{ method: 'POST', route: '/r', status: 201, seconds: 0.003 }]);
    expect(text).toContain('http_request_duration_seconds_bucket{le="0.0025",method="POST",route="/r",status="201"} 0');
    expect(text).toContain('http_request_duration_seconds_bucket{le="0.005",method="POST",route="/r",status="201"} 1');
    expect(text).toContain('http_request_duration_seconds_bucket{le="+Inf",method="POST",route="/r",status="201"} 1');
    expect(text).toContain('http_requests_total{method="POST",route="/r",status="201"} 1');
  });

  it('starts again from nothing when the registry is reset', async () => {
    const registry = new Registry();
    const tally = registerRequestTally(registry, NAMES);
    tally.record('GET', '/r', 200, 0.01);
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('route="/r"');
    tally.record('GET', '/r', 200, 0.01);
    expect(await registry.metrics()).toContain('http_requests_total{method="GET",route="/r",status="200"} 1');
  });
});
