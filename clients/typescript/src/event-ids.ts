// Safe retries of appends: the server treats an event whose eventId it already stored (with the
// same payload) as a replay, not a new event. So every event leaves the client with an id, chosen
// once before the first attempt: a retry after a lost answer sends the same ids and stores nothing
// twice.
import type { components } from './generated/openapi.js';

export type AppendEvent = components['schemas']['AppendEvent'];
export type AppendBody = AppendEvent | { events: AppendEvent[] };

/** The body with an eventId on every event that lacked one; the caller's own ids are kept. */
export function withEventIds<B extends AppendBody>(body: B, newId: () => string = () => globalThis.crypto.randomUUID()): B {
  const withId = (event: AppendEvent): AppendEvent => (event.eventId === undefined ? { ...event, eventId: newId() } : event);
  if ('events' in body) return { ...body, events: body.events.map(withId) };
  return withId(body) as B;
}
