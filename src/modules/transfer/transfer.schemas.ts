// The export document (docs/design.md §4.9) and the rules an import checks before it writes anything. Limits
// are configurable, so the import schema is built per application. Every rule is a zod issue with
// a path, so a bad document answers 400 naming the field, e.g. `events[3].seq`.
import { z } from 'zod';
import type { Limits } from '../../config.js';
import { Identifier, JsonObject, JsonValue, SpaceId, Timestamp, TimestampInput } from '../../http/schemas.js';
import { jsonBytes, jsonDepth } from '../../lib/json-measure.js';
import { Event, EventInput } from '../events/index.js';
import { WrittenSession, MEMO_MAX_BYTES } from '../sessions/index.js';
import { APP_PREFIX, USER_PREFIX } from '../state/index.js';

export const EXPORT_FORMAT = 'agent-session/v1';

/** Export and import both stop here; a longer history is refused rather than held in memory. */
export const MAX_TRANSFER_EVENTS = 100_000;

/** The import body limit, larger than the API's usual one because a document carries a whole history. */
export const IMPORT_BODY_BYTES = 32 * 1024 * 1024;

const ScopedState = z
  .strictObject({
    user: JsonObject.describe('The user-scoped state of the session\'s user (space_users.state), as stored.'),
    app: JsonObject.describe('The space-scoped state (session_spaces.state), as stored.'),
  })
  .describe('The user: and app: state the session sees. Import merges it into the target (top-level keys of the document win).');

const sessionFields = {
  userId: Identifier,
  sessionId: Identifier,
  title: z.string(),
  metadata: z.record(z.string(), z.string()),
  state: JsonObject.describe('The session\'s own keys (without user: and app: keys).'),
  scopedState: ScopedState,
  memo: JsonValue.nullable(),
  windowStartSeq: z.number().int().min(1),
  eventCount: z.number().int().min(0),
  revision: z.number().int().min(1),
};

export const ExportedSession = z.object({
  spaceId: SpaceId.describe('The space it was exported from; ignored by import.'),
  ...sessionFields,
  createTime: Timestamp,
  updateTime: Timestamp,
  expireTime: Timestamp.nullable(),
});

export const ExportDocument = z
  .object({
    format: z.literal(EXPORT_FORMAT),
    session: ExportedSession,
    events: z.array(Event).describe('Every event, by seq, with its original ids and times.'),
  })
  .meta({ id: 'SessionExport' });

export type ExportedSessionValue = z.infer<typeof ExportedSession>;
export type ExportDocumentValue = z.infer<typeof ExportDocument>;

export const ExportQuery = z.strictObject({
  format: z.enum(['json', 'yaml']).optional().describe('Overrides the Accept header: json or yaml.'),
});


const ImportedEvent = EventInput.extend({
  seq: z.number().int().min(1),
  eventId: Identifier,
  timestamp: TimestampInput,
  createTime: TimestampInput,
});

export type ImportedEventValue = z.infer<typeof ImportedEvent>;

export function importSchemas(limits: Limits) {
  const ImportedSession = z.strictObject({
    spaceId: SpaceId.optional().describe('Ignored: the session goes into the space of the path.'),
    ...sessionFields,
    title: z.string().max(limits.titleChars),
    // The states' sizes and the metadata rules are checked by the service, with the codes the other
    // writes answer (413 LimitExceeded.State naming the scope, 400 InvalidParameter.Metadata).
    scopedState: z.strictObject({ user: JsonObject, app: JsonObject }),
    memo: sessionFields.memo.refine((memo) => jsonBytes(memo) <= MEMO_MAX_BYTES, `must be at most ${MEMO_MAX_BYTES} bytes serialized`),
    createTime: TimestampInput,
    updateTime: TimestampInput,
    expireTime: TimestampInput.nullable(),
  });

  const ImportBody = z
    .strictObject({
      format: z.literal(EXPORT_FORMAT),
      session: ImportedSession,
      events: z.array(ImportedEvent).max(MAX_TRANSFER_EVENTS),
    })
    .superRefine((doc, ctx) => {
      const issue = (path: (string | number)[], message: string) => ctx.addIssue({ code: 'custom', path, message });
      const { session, events } = doc;
      for (const [scope, prefix] of [['user', USER_PREFIX], ['app', APP_PREFIX]] as const) {
        for (const stateKey of Object.keys(session.scopedState[scope])) {
          if (!stateKey.startsWith(prefix)) issue(['session', 'scopedState', scope, stateKey], `keys of the ${scope} scope must start with "${prefix}"`);
        }
      }
      if (session.eventCount !== events.length) issue(['session', 'eventCount'], `must equal the number of events (${events.length})`);
      if (session.windowStartSeq > events.length + 1) issue(['session', 'windowStartSeq'], `must be at most eventCount + 1 (${events.length + 1})`);
      if (session.expireTime !== null && Date.parse(session.expireTime) <= Date.now()) issue(['session', 'expireTime'], 'is in the past: the session has expired');
      const seen = new Set<string>();
      events.forEach((event, index) => {
        if (event.seq !== index + 1) issue(['events', index, 'seq'], `must be ${index + 1}: seq runs 1, 2, 3 … in order without gaps`);
        if (seen.has(event.eventId)) issue(['events', index, 'eventId'], `duplicates an earlier event's eventId "${event.eventId}"`);
        seen.add(event.eventId);
        const delta = event.actions?.stateDelta;
        if (delta !== undefined && jsonDepth(delta) > limits.stateDeltaDepth) issue(['events', index, 'actions', 'stateDelta'], `is nested deeper than ${limits.stateDeltaDepth} levels`);
        if (delta !== undefined && jsonBytes(delta) > limits.stateDeltaBytes) issue(['events', index, 'actions', 'stateDelta'], `must be at most ${limits.stateDeltaBytes} bytes serialized`);
        // Measured as an append measures what it is sent: without the fields the service may have
        // filled in itself (seq and createTime always; eventId and timestamp when the append had none),
        // so that an event appended at the limit imports again.
        const { seq: _seq, createTime: _createTime, eventId: _eventId, timestamp: _timestamp, ...sent } = event;
        if (jsonBytes(sent) > limits.eventBytes) issue(['events', index], `must be at most ${limits.eventBytes} bytes serialized (without seq, createTime, eventId and timestamp)`);
      });
    })
    .describe(`An export document (format ${EXPORT_FORMAT}), as JSON or YAML.`);

  return { ImportBody };
}

export type ImportBodyValue = z.infer<ReturnType<typeof importSchemas>['ImportBody']>;

export const ImportResponse = WrittenSession.describe(
  'The imported session (state shown merged with its user: and app: keys; title, metadata, state and memo only to a caller allowed session:DescribeSessions).',
);
