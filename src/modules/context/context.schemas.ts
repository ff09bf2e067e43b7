// Request and response schemas of the context routes (docs/design.md §4.7).
import { z } from 'zod';
import { JsonValue } from '../../http/schemas.js';
import { Event } from '../events/index.js';
import { Session } from '../sessions/index.js';

export const CONTEXT_DEFAULTS = { maxChars: 100_000, maxEvents: 100 } as const;
export const CONTEXT_MAX = { maxChars: 10_000_000, maxEvents: 1000 } as const;

export const ContextQuery = z.object({
  maxChars: z.coerce
    .number()
    .int()
    .min(1)
    .max(CONTEXT_MAX.maxChars)
    .default(CONTEXT_DEFAULTS.maxChars)
    .describe(`Budget in characters of the events' JSON (default ${CONTEXT_DEFAULTS.maxChars}, at most ${CONTEXT_MAX.maxChars}).`),
  maxEvents: z.coerce
    .number()
    .int()
    .min(1)
    .max(CONTEXT_MAX.maxEvents)
    .default(CONTEXT_DEFAULTS.maxEvents)
    .describe(`At most this many events (default ${CONTEXT_DEFAULTS.maxEvents}, at most ${CONTEXT_MAX.maxEvents}).`),
});

export type ContextBudget = z.infer<typeof ContextQuery>;

export const PutContextBody = z.strictObject({
  windowStartSeq: z
    .number()
    .int()
    .min(1)
    .optional()
    .describe('First seq the context window may show; at most eventCount + 1 (an empty window until the next event).'),
  memo: JsonValue.optional().describe('The application\'s memo (any JSON, at most 64 KiB serialized); null clears it.'),
});

export type PutContextInput = z.infer<typeof PutContextBody>;

export const ContextEvent = Event.extend({
  truncated: z.literal(true).optional().describe('Only on the newest event, when its text was cut from the front to fit maxChars.'),
});

export const ContextWindowInfo = z.object({
  startSeq: z.number().int().describe('seq of the first returned event.'),
  endSeq: z.number().int().describe('seq of the last returned event: the newest of the session. An empty window has endSeq = startSeq - 1.'),
  omittedEvents: z.number().int().describe('Events from windowStartSeq to endSeq that are not returned (they did not fit the budget).'),
});

export const SessionContext = z.object({
  session: Session,
  memo: JsonValue.nullable().describe('The application\'s memo, as last written by PUT …/context or PATCH.'),
  events: z.array(ContextEvent).describe('Oldest first.'),
  window: ContextWindowInfo,
});
