// Turns the result of a successful append into the append metrics (issue 5, observability).
import type { JsonObject } from '../../db/schema.js';
import type { AppMetrics } from '../../lib/metrics-registry.js';
import { jsonBytes } from '../../lib/json-measure.js';
import { type StoredScope, scopesTouched } from '../state/scoped-state.js';
import type { AppendEventsBody } from './events.schemas.js';
import type { AppendEventsResult } from './append.service.js';

export function recordAppend(metrics: AppMetrics['appends'], body: AppendEventsBody, result: AppendEventsResult): void {
  if (result.replayOnly) {
    metrics.requests.inc({ outcome: 'replayed' });
    metrics.eventsReplayed.inc(result.events.length);
    return;
  }
  const inputs = 'events' in body ? body.events : [body];
  // The result lists one event per input, in order; the events this request stored hold the
  // session's newest seq numbers. The same eventId twice in a batch is one event.
  const firstWrittenSeq = result.session.eventCount - result.writtenCount + 1;
  const written = new Set<number>();
  let deltaBytes = 0;
  const touched = new Set<StoredScope>();
  result.events.forEach((event, index) => {
    if (event.seq < firstWrittenSeq || written.has(event.seq)) return;
    written.add(event.seq);
    const delta = inputs[index]?.actions?.stateDelta as JsonObject | undefined;
    if (delta === undefined) return;
    deltaBytes += jsonBytes(delta);
    for (const scope of scopesTouched(delta)) touched.add(scope);
  });
  metrics.requests.inc({ outcome: 'appended' });
  metrics.eventsAppended.inc(written.size);
  metrics.eventsReplayed.inc(result.events.length - written.size);
  if (deltaBytes > 0) metrics.stateDeltaBytes.inc(deltaBytes);
  // The sizes the state limit measured as the append wrote them: nothing is serialized again here.
  for (const scope of touched) {
    const bytes = result.stateBytes[scope];
    if (bytes !== undefined) metrics.stateBytes.observe({ scope }, bytes);
  }
}
