// Request and response schemas of the events routes.
import type { FastifySchemaCompiler } from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { compiledSchema } from '../../lib/compiled-schema.js';
import { Identifier, IncludeTotal, JsonObject, PageToken, SessionPath, TimestampInput, ifMatchHeaders, pageSize } from '../../http/schemas.js';
import { WrittenSession } from '../sessions/index.js';
import { Event, EventActions, EventContent } from './event.model.js';

export const EventInput = z
  .strictObject({
    eventId: Identifier.optional().describe('Unique per session; generated when absent. Resending an event with the same id and payload is a safe retry.'),
    invocationId: z.string().min(1).max(128).optional(),
    author: z.string().min(1).max(128).describe('Who produced the event: "user" or the agent\'s name.'),
    content: EventContent.optional(),
    actions: EventActions.optional(),
    metadata: JsonObject.optional(),
    extensions: JsonObject.optional(),
    errorCode: z.string().min(1).max(128).optional(),
    errorMessage: z.string().optional(),
    timestamp: TimestampInput.optional().describe('RFC 3339; stored as given (at millisecond precision), default server time.'),
  })
  .meta({ id: 'AppendEvent' });

export type EventInputValue = z.infer<typeof EventInput>;

/** The batch shape depends on the configured batch limit, so it is built per application. */
export const eventBatchInput = (maxEvents: number) =>
  z.strictObject({
    events: z.array(EventInput).min(1).max(maxEvents).describe(`1 to ${maxEvents} events, appended atomically and in order.`),
  });

export const appendEventsBody = (maxEvents: number) =>
  z.union([EventInput, eventBatchInput(maxEvents)]).describe('One event, or `{ "events": [...] }` for an atomic batch.');

export type AppendEventsBody = z.infer<ReturnType<typeof appendEventsBody>>;

/**
 * Validates the append body against one shape, chosen by whether it has an `events` key. A plain
 * union would answer a bad event inside a batch with zod's `invalid_union` on the whole body; this
 * way the error names the real field, e.g. `events[3].author`. Other parts of the request use the
 * ordinary validator. Every part is compiled (lib/compiled-schema.ts): the append is the
 * hottest route.
 */
export function appendEventsValidatorCompiler<RouteSchema>(maxEvents: number): FastifySchemaCompiler<RouteSchema> {
  const validateSingle = validatorCompiler({ schema: compiledSchema(EventInput), method: 'POST', url: '', httpPart: 'body' });
  const validateBatch = validatorCompiler({ schema: compiledSchema(eventBatchInput(maxEvents)), method: 'POST', url: '', httpPart: 'body' });
  return (route) => {
    // Fastify hands each part's own schema over, typed as the route's schema.
    if (route.httpPart !== 'body') return validatorCompiler({ ...route, schema: compiledSchema(route.schema as z.ZodType) });
    return (data: unknown) => {
      const isBatch = data !== null && typeof data === 'object' && !Array.isArray(data) && Object.hasOwn(data, 'events');
      return isBatch ? validateBatch(data) : validateSingle(data);
    };
  };
}

export const EventPath = SessionPath.extend({ eventId: Identifier });

/** The append's If-Match: the shared header, described for what it guards here. */
export const IfMatchHeaders = ifMatchHeaders('"<revision>" from an ETag: the append happens only if the session is still at that revision.');

export const AppendEventsResponse = z.object({
  events: z.array(Event).describe('The stored events, in request order; a replayed event is the one stored first.'),
  session: WrittenSession,
});

const SeqBound = z.coerce.number().int().min(0); // int() bounds it to safe integers, with its own message

export const ListEventsQuery = z.strictObject({
  afterSeq: SeqBound.optional().describe('Only events with seq greater than this.'),
  beforeSeq: SeqBound.optional().describe('Only events with seq less than this.'),
  after: TimestampInput.optional().describe('Only events whose timestamp is later than this (exclusive).'),
  before: TimestampInput.optional().describe('Only events whose timestamp is earlier than this (exclusive).'),
  author: z.string().min(1).max(128).optional(),
  order: z.enum(['asc', 'desc']).default('asc').describe('By seq.'),
  pageSize: pageSize(50, 200),
  pageToken: PageToken.optional(),
  includeTotal: IncludeTotal,
});

export type ListEventsQueryValue = z.infer<typeof ListEventsQuery>;

export const ListEventsResponse = z.object({
  events: z.array(Event),
  nextPageToken: z.string().optional().describe('Present while more events match.'),
  totalCount: z.number().int().optional().describe('Present when includeTotal=true.'),
});
