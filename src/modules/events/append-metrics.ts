// Turns the result of a successful append into the append metrics (issue 5, observability).
import type { AppMetrics } from '../../lib/metrics-registry.js';
import type { AppendEventsResult } from './append.service.js';

export function recordAppend(metrics: AppMetrics['appends'], result: AppendEventsResult): void {
  // The result answers one event per input; the same eventId twice in a batch is one written event.
  metrics.requests.inc({ outcome: result.replayOnly ? 'replayed' : 'appended' });
  metrics.eventsAppended.inc(result.writtenCount);
  metrics.eventsReplayed.inc(result.events.length - result.writtenCount);
  if (result.deltaBytes > 0) metrics.stateDeltaBytes.inc(result.deltaBytes);
  // The sizes the state limit measured as the append wrote them, for each scope it wrote: nothing
  // is serialized again here.
  for (const [scope, bytes] of Object.entries(result.stateBytes)) metrics.stateBytes.observe({ scope }, bytes);
}
