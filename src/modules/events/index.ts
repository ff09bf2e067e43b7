// The events module's public entry: the event's model and schemas, the append path's types, the
// event list, and the append metrics the API 3.0 face records.
export { recordAppend } from './append-metrics.js';
export type { AppendDeps, AppendPath } from './append.service.js';
export { Event, type EventView, toEventView } from './event.model.js';
export { EventInput, type EventInputValue, ListEventsQuery } from './events.schemas.js';
export { listSessionEvents } from './events.service.js';
// For the wiring (src/app.ts, src/routes.ts).
export { batchingOptions, createAppendBatcher } from './append-batcher.js';
export { createAppendPath } from './append.service.js';
export { EVENT_STREAM_ACTION, eventStreamRoutes } from './event-stream.routes.js';
export { createEventStreams } from './event-stream.service.js';
export { eventsRoutes } from './events.routes.js';
export { stateHistoryRoutes } from './state-history.routes.js';
