// Counts kept as plain numbers on a hot path and turned into Prometheus samples only when /metrics
// is scraped: what the request tally (request-tally.ts) and the append's state sizes
// (metrics-registry.ts) share. prom-client's own Counter and Histogram build a hash string of the
// labels object on every inc() and observe(); at thousands of requests a second those strings
// were a measurable part of an append's CPU (issue 24, bench/README.md).
//
// The samples are the ones prom-client lists for a Counter and a Histogram fed the same values, in
// the same order (test/unit/request-tally.test.ts and test/unit/tally.test.ts compare the two).
import type { Registry } from 'prom-client';

/** One label set's observations. */
export interface Tally {
  labels: Record<string, string>;
  count: number;
  sum: number;
  /** Observations per bucket: index i holds those at most buckets[i] and above buckets[i − 1]. */
  perBucket: number[];
}

export const newTally = (labels: Record<string, string>, buckets: readonly number[]): Tally => ({ labels, count: 0, sum: 0, perBucket: buckets.map(() => 0) });

export function addToTally(tally: Tally, buckets: readonly number[], value: number): void {
  tally.count++;
  tally.sum += value;
  // The first bound the value is within; past the last one it counts only in +Inf (count).
  for (let index = 0; index < buckets.length; index++) {
    if (value <= buckets[index]!) {
      tally.perBucket[index]!++;
      return;
    }
  }
}

interface Sample {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

/** A histogram's samples for one tally, as prom-client writes them: cumulative buckets, +Inf, sum, count. */
export function histogramSamples(name: string, buckets: readonly number[], tally: Tally): Sample[] {
  const bucketName = `${name}_bucket`;
  let cumulative = 0;
  const samples: Sample[] = buckets.map((bound, index) => {
    cumulative += tally.perBucket[index]!;
    return { value: cumulative, labels: { le: bound, ...tally.labels }, metricName: bucketName };
  });
  samples.push(
    { value: tally.count, labels: { le: '+Inf', ...tally.labels }, metricName: bucketName },
    { value: tally.sum, labels: { ...tally.labels }, metricName: `${name}_sum` },
    { value: tally.count, labels: { ...tally.labels }, metricName: `${name}_count` },
  );
  return samples;
}

/** The counter's sample for one tally. */
export const counterSamples = (tally: Tally): Sample[] => [{ value: tally.count, labels: { ...tally.labels } }];

/**
 * Registers a metric whose samples are built from `tallies()` when scraped; `reset` empties what
 * they come from (Registry.resetMetrics calls it). `as never`: prom-client types registerMetric with
 * its own Metric class; the Registry reads only what this object has (name, help, type, aggregator,
 * get, reset).
 */
export function registerScrapedMetric(
  registry: Registry,
  { name, help, type }: { name: string; help: string; type: 'counter' | 'histogram' },
  tallies: () => readonly Tally[],
  samples: (tally: Tally) => Sample[],
  reset: () => void,
): void {
  registry.registerMetric({
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: tallies().flatMap(samples) }),
    reset,
  } as never);
}

/** A histogram of one label, kept as tallies: observe() allocates nothing once a label value has been seen. */
export interface LabelledHistogram {
  observe(labelValue: string, value: number): void;
}

export function registerLabelledHistogram(
  registry: Registry,
  { name, help, labelName, buckets }: { name: string; help: string; labelName: string; buckets: readonly number[] },
): LabelledHistogram {
  const bounds = [...buckets];
  // A Map lists its entries in the order they were added: the order prom-client lists label sets in.
  let byValue = new Map<string, Tally>();
  registerScrapedMetric(
    registry,
    { name, help, type: 'histogram' },
    () => [...byValue.values()],
    (tally) => histogramSamples(name, bounds, tally),
    () => {
      byValue = new Map();
    },
  );
  return {
    observe(labelValue, value) {
      let tally = byValue.get(labelValue);
      if (!tally) byValue.set(labelValue, (tally = newTally({ [labelName]: labelValue }, bounds)));
      addToTally(tally, bounds, value);
    },
  };
}
