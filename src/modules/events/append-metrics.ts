// Turns the result of a successful append into the append metrics (issue 5, observability).
import type { AppMetrics } from '../../lib/metrics-registry.js';
import type { AppendEventsResult } from './append.service.js';

export function recordAppend(metrics: AppMetrics['appends'], result: AppendEventsResult): void {
  // The result answers one event per input; the same eventId twice in a batch is one written event.
  const { counts } = metrics;
  if (result.replayOnly) counts.replayed++;
  else counts.appended++;
  counts.eventsAppended += result.writtenCount;
  counts.eventsReplayed += result.events.length - result.writtenCount;
  counts.stateDeltaBytes += result.deltaBytes;
  // The sizes the state limit measured as the append wrote them, for each scope it wrote: nothing
  // is serialized again here.
  const { session, user, app } = result.stateBytes;
  if (session !== undefined) metrics.stateBytes.observe('session', session);
  if (user !== undefined) metrics.stateBytes.observe('user', user);
  if (app !== undefined) metrics.stateBytes.observe('app', app);
}
