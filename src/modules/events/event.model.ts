// The event as the API shows it (ADK-compatible shape, camelCase), shared by every module that
// returns events (append, list, export).
import { z } from 'zod';
import type { EventRow, JsonObject as JsonObjectValue } from '../../db/schema.js';
import { JsonObject, Timestamp } from '../../http/schemas.js';
import { STATE_DELTA_MODES } from '../state/index.js';

const PART_FIELDS = ['text', 'thought', 'functionCall', 'functionResponse', 'inlineData'] as const;

// Standard or URL-safe alphabet: ADK clients produce either, depending on their JSON encoder.
const BASE64 = /^[A-Za-z0-9+/_-]*={0,2}$/;

const EventPart = z
  .strictObject({
    text: z.string().optional(),
    thought: z.boolean().optional().describe('true when the text is the model\'s reasoning rather than its answer.'),
    functionCall: z
      .strictObject({ id: z.string().max(128).optional(), name: z.string().min(1).max(256), args: JsonObject })
      .optional(),
    functionResponse: z
      .strictObject({ id: z.string().max(128).optional(), name: z.string().min(1).max(256), response: JsonObject })
      .optional(),
    inlineData: z
      .strictObject({
        mimeType: z.string().min(1).max(256),
        data: z.string().regex(BASE64, 'must be base64 (standard or URL-safe alphabet)'),
      })
      .optional(),
  })
  .refine((part) => PART_FIELDS.some((field) => part[field] !== undefined), {
    message: `a part needs at least one of ${PART_FIELDS.join(', ')}`,
  });

export const EventContent = z.strictObject({
  role: z.string().min(1).max(128).optional().describe('Usually "user" or "model".'),
  parts: z.array(EventPart),
});

export const EventActions = z.strictObject({
  stateDelta: JsonObject.optional().describe('Applied to the session state in the same transaction as the append.'),
  stateDeltaMode: z
    .enum(STATE_DELTA_MODES)
    .optional()
    .describe('merge-patch (default): RFC 7396, null deletes a key. replace: top-level keys are replaced whole, null is stored.'),
});

export const Event = z
  .object({
    seq: z.number().int().describe('Server-assigned position in the session: 1, 2, 3 … without gaps.'),
    eventId: z.string(),
    invocationId: z.string().optional(),
    author: z.string(),
    content: EventContent.optional(),
    actions: EventActions.optional(),
    metadata: JsonObject.optional(),
    extensions: JsonObject.optional(),
    errorCode: z.string().optional(),
    errorMessage: z.string().optional(),
    timestamp: Timestamp.describe('The client\'s timestamp as given (default: server time); used only for filtering.'),
    createTime: Timestamp,
  })
  .meta({ id: 'Event' });

export type EventView = z.infer<typeof Event>;

/** The columns an event view is made of (rows read with fewer columns qualify). */
export type EventViewRow = Omit<EventRow, 'account_id' | 'space_id' | 'user_id' | 'session_id' | 'payload_hash'>;

/**
 * Absent optional fields are left out rather than sent as null. Written field by field, in the
 * schema's order, rather than with conditional spreads: every list, read and append answer builds
 * one per event, and each spread made an object of its own (bench/README.md, issue 24).
 */
export function toEventView(row: EventViewRow): EventView {
  const view: EventView = { seq: row.seq, eventId: row.event_id } as EventView;
  if (row.invocation_id !== null) view.invocationId = row.invocation_id;
  view.author = row.author;
  if (row.content !== null) view.content = row.content as z.infer<typeof EventContent>;
  if (row.actions !== null) view.actions = row.actions as z.infer<typeof EventActions>;
  if (row.metadata !== null) view.metadata = row.metadata as JsonObjectValue;
  if (row.extensions !== null) view.extensions = row.extensions as JsonObjectValue;
  if (row.error_code !== null) view.errorCode = row.error_code;
  if (row.error_message !== null) view.errorMessage = row.error_message;
  view.timestamp = row.event_time.toISOString();
  view.createTime = row.create_time.toISOString();
  return view;
}
