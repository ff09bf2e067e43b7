// The append's state sizes moved from a prom-client Histogram to a labelled tally (issue 24): a
// scraper must see what it saw before. prom-client itself, fed the same values, is the reference.
import fc from 'fast-check';
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { expectPromClientExposition } from '../support/prom-client-parity.js';
import { registerLabelledHistogram } from '../../src/lib/tally.js';

const HISTOGRAM = { name: 'state_size_bytes', help: 'Sizes.', buckets: [64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576] };

interface Observation {
  scope: string;
  bytes: number;
}

async function promClientText(observations: Observation[]): Promise<string> {
  const registry = new Registry();
  const histogram = new Histogram({ ...HISTOGRAM, labelNames: ['scope'] as const, registers: [registry] });
  for (const { scope, bytes } of observations) histogram.observe({ scope }, bytes);
  return registry.metrics();
}

async function tallyText(observations: Observation[]): Promise<string> {
  const registry = new Registry();
  const histogram = registerLabelledHistogram(registry, { ...HISTOGRAM, labelName: 'scope' });
  for (const { scope, bytes } of observations) histogram.observe(scope, bytes);
  return registry.metrics();
}

const observation = fc.record({
  // A quote and a backslash need escaping in a label value.
  scope: fc.constantFrom('session', 'user', 'app', 'odd"\\scope'),
  // Exactly on a bound, between bounds, past the last, and zero.
  bytes: fc.oneof(fc.constantFrom(0, 64, 65, 1_048_576, 1_048_577, 5_000_000), fc.integer({ min: 0, max: 2_000_000 })),
});

describe('the labelled histogram', () => {
  it('exposes what prom-client exposes for the same observations, line for line', async () => {
    await expectPromClientExposition(observation, tallyText, promClientText);
  });

  it('counts a value on a bound in that bound\'s bucket, and one past the last only in +Inf', async () => {
    const text = await tallyText([{ scope: 'session', bytes: 64 }, { scope: 'session', bytes: 2_000_000 }]);
    expect(text).toContain('state_size_bytes_bucket{le="64",scope="session"} 1');
    expect(text).toContain('state_size_bytes_bucket{le="1048576",scope="session"} 1');
    expect(text).toContain('state_size_bytes_bucket{le="+Inf",scope="session"} 2');
    expect(text).toContain('state_size_bytes_sum{scope="session"} 2000064');
  });

  it('empties on Registry.resetMetrics', async () => {
    const registry = new Registry();
    const histogram = registerLabelledHistogram(registry, { ...HISTOGRAM, labelName: 'scope' });
    histogram.observe('user', 10);
    registry.resetMetrics();
    expect(await registry.metrics()).not.toContain('scope="user"');
    histogram.observe('app', 10);
    expect(await registry.metrics()).toContain('state_size_bytes_count{scope="app"} 1');
  });
});
