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
import { type Tally, addToTally, counterSamples, histogramSamples, newTally, registerScrapedMetric } from './tally.js';

export interface RequestTally {
  /** One answered request: its method, route template, status and time from arrival to the answer's end. */
  record(method: string, route: string, status: number, seconds: number): void;
}

export interface RequestTallyNames {
  counter: { name: string; help: string };
  histogram: { name: string; help: string; buckets: readonly number[] };
}

/** Registers the two metrics in `registry` and answers the tally that feeds them. */
export function registerRequestTally(registry: Registry, names: RequestTallyNames): RequestTally {
  const buckets = [...names.histogram.buckets];
  /** route → method → status → tally: three lookups of strings and a number, nothing allocated per request. */
  let byRoute = new Map<string, Map<string, Map<number, Tally>>>();
  /** The same tallies in the order their label sets first came, the order prom-client lists them in. */
  let inOrder: Tally[] = [];
  // The two metrics share one tally: resetting either (Registry.resetMetrics resets both) empties it.
  const reset = () => {
    byRoute = new Map();
    inOrder = [];
  };
  registerScrapedMetric(registry, { ...names.counter, type: 'counter' }, () => inOrder, counterSamples, reset);
  registerScrapedMetric(registry, { name: names.histogram.name, help: names.histogram.help, type: 'histogram' }, () => inOrder, (tally) => histogramSamples(names.histogram.name, buckets, tally), reset);

  return {
    record(method, route, status, seconds) {
      let byMethod = byRoute.get(route);
      if (!byMethod) byRoute.set(route, (byMethod = new Map()));
      let byStatus = byMethod.get(method);
      if (!byStatus) byMethod.set(method, (byStatus = new Map()));
      let tally = byStatus.get(status);
      if (!tally) {
        tally = newTally({ method, route, status: String(status) }, buckets);
        byStatus.set(status, tally);
        inOrder.push(tally);
      }
      addToTally(tally, buckets, seconds);
    },
  };
}
