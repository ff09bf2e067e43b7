// The count and the duration of every HTTP request, by method, route template and status, for
// /metrics (http_requests_total, http_request_duration_seconds). Every request adds to them, so they
// are kept as plain numbers, found through maps of the label values, and given to prom-client's
// registry as samples only when it is scraped. prom-client's own Counter and Histogram build a hash
// string of the labels object on every inc() and observe() (issue 24: with the hook, ~2.4 µs of the
// ~140 µs of server CPU a light append costs; the hook and this tally took ~0.1 µs in the profile
// after, bench/README.md).
//
// The exposition is the one prom-client writes for a Counter and a Histogram fed the same requests,
// line for line (test/unit/request-tally.test.ts compares the two).
import type { Registry } from 'prom-client';

export interface RequestTally {
  /** One answered request: its method, route template, status and time from arrival to the answer's end. */
  record(method: string, route: string, status: number, seconds: number): void;
}

export interface RequestTallyNames {
  counter: { name: string; help: string };
  histogram: { name: string; help: string; buckets: readonly number[] };
}

interface Tally {
  labels: { method: string; route: string; status: string };
  count: number;
  sum: number;
  /** Requests per bucket: index i holds those at most buckets[i] and above buckets[i − 1]. */
  perBucket: number[];
}

/** A metric as prom-client's Registry reads it (its Counter and Histogram have the same shape). */
interface ScrapedMetric {
  name: string;
  help: string;
  type: 'counter' | 'histogram';
  aggregator: 'sum';
  get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }>;
  reset(): void;
}

interface Sample {
  value: number;
  labels: Record<string, string | number>;
  metricName?: string;
}

/** Registers the two metrics in `registry` and answers the tally that feeds them. */
export function registerRequestTally(registry: Registry, names: RequestTallyNames): RequestTally {
  const buckets = [...names.histogram.buckets];
  /** route → method → status → tally: three lookups of strings and a number, nothing allocated per request. */
  let byRoute = new Map<string, Map<string, Map<number, Tally>>>();
  /** The same tallies in the order their label sets first came, the order prom-client lists them in. */
  let inOrder: Tally[] = [];

  const metric = (type: ScrapedMetric['type'], { name, help }: { name: string; help: string }, samples: (tally: Tally) => Sample[]): ScrapedMetric => ({
    name,
    help,
    type,
    aggregator: 'sum',
    get: async () => ({ name, help, type, aggregator: 'sum', values: inOrder.flatMap(samples) }),
    // The two metrics share one tally: resetting either (Registry.resetMetrics resets both) empties it.
    reset: () => {
      byRoute = new Map();
      inOrder = [];
    },
  });

  // `as never`: prom-client types registerMetric with its own Metric class; the Registry reads only
  // what ScrapedMetric has.
  registry.registerMetric(metric('counter', names.counter, (tally) => [{ value: tally.count, labels: { ...tally.labels } }]) as never);
  registry.registerMetric(
    metric('histogram', names.histogram, (tally) => {
      const bucketName = `${names.histogram.name}_bucket`;
      let cumulative = 0;
      const samples: Sample[] = buckets.map((bound, index) => {
        cumulative += tally.perBucket[index]!;
        return { value: cumulative, labels: { le: bound, ...tally.labels }, metricName: bucketName };
      });
      samples.push(
        { value: tally.count, labels: { le: '+Inf', ...tally.labels }, metricName: bucketName },
        { value: tally.sum, labels: { ...tally.labels }, metricName: `${names.histogram.name}_sum` },
        { value: tally.count, labels: { ...tally.labels }, metricName: `${names.histogram.name}_count` },
      );
      return samples;
    }) as never,
  );

  return {
    record(method, route, status, seconds) {
      let byMethod = byRoute.get(route);
      if (!byMethod) byRoute.set(route, (byMethod = new Map()));
      let byStatus = byMethod.get(method);
      if (!byStatus) byMethod.set(method, (byStatus = new Map()));
      let tally = byStatus.get(status);
      if (!tally) {
        tally = { labels: { method, route, status: String(status) }, count: 0, sum: 0, perBucket: buckets.map(() => 0) };
        byStatus.set(status, tally);
        inOrder.push(tally);
      }
      tally.count++;
      tally.sum += seconds;
      // The first bound the duration is within; past the last one it counts only in +Inf (count).
      for (let index = 0; index < buckets.length; index++) {
        if (seconds <= buckets[index]!) {
          tally.perBucket[index]!++;
          break;
        }
      }
    },
  };
}
