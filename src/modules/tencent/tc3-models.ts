// The structures of the ags 2025-09-20 models (SessionSpaceInfo, SessionInfo, EventInfo, Filter,
// MetadataVar, SessionState) and their mapping to and from the service's views. Field names,
// types and the per-field limits are the SDK models' (docs/tencent-api.md); the service's own
// rules apply underneath (tc3-validation.ts, stage 2).
import { z } from 'zod';
import type { JsonObject as JsonObjectValue } from '../../db/schema.js';
import { findInexactIntegerLiteral } from '../../lib/inexact-integer.js';
import { jsonPathName } from '../../lib/json-path.js';
import { MAX_BODY_NESTING, holdsNonFiniteNumber, jsonDepth } from '../../lib/json-measure.js';
import { findPrototypeKey, parseJson } from '../../lib/parse-json.js';
import { findUnstorable } from '../../lib/unstorable-text.js';
import { TimestampInput } from '../../http/schemas.js';
import { STATE_DELTA_MODES } from '../state/index.js';
import type { EventInputValue, EventView } from '../events/index.js';
import type { SessionView, WrittenSessionView } from '../sessions/index.js';
import type { SpaceView } from '../spaces/index.js';

/** A String field holding a JSON object (`CustomState`, `StateDelta`, `Extensions`, …), parsed. */
export const jsonObjectString = (max?: number, maxDepth = MAX_BODY_NESTING - 1) => {
  const text = max === undefined ? z.string() : z.string().max(max, `must be at most ${max} characters`);
  return text.transform((value, ctx): JsonObjectValue => {
    let parsed: unknown;
    try {
      parsed = parseJson(value);
    } catch {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON string holding a JSON object, e.g. "{\\"k\\":1}"' });
      return z.NEVER;
    }
    if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
      ctx.addIssue({ code: 'custom', message: 'must be a JSON string holding a JSON object, not another JSON value' });
      return z.NEVER;
    }
    // As deep as the same value in a REST body may be: an export holding it must import again.
    if (jsonDepth(parsed) > maxDepth) {
      ctx.addIssue({ code: 'custom', message: `is nested deeper than ${maxDepth} levels` });
      return z.NEVER;
    }
    // A number literal beyond a double's range (`1e400`) is Infinity here, which jsonb cannot store.
    if (holdsNonFiniteNumber(parsed)) {
      ctx.addIssue({ code: 'custom', message: 'must not hold a number beyond a double\'s range (e.g. 1e400): JSON has no Infinity' });
      return z.NEVER;
    }
    // What a REST body may not hold either: the JSON body parser refuses prototype keys, and a NUL
    // or a lone surrogate written as an escape (`\\u0000` inside this string) reaches jsonb otherwise.
    const prototypeKey = findPrototypeKey(parsed);
    if (prototypeKey) {
      ctx.addIssue({ code: 'custom', message: `must not hold the key "${prototypeKey}" (refused as prototype poisoning, as in a JSON body)` });
      return z.NEVER;
    }
    const unstorable = findUnstorable(parsed);
    if (unstorable) {
      ctx.addIssue({ code: 'custom', message: `at ${jsonPathName(unstorable.path) || 'its top'}: ${unstorable.rule}` });
      return z.NEVER;
    }
    // An integer with more digits than a double holds was rounded by the parse (as in a JSON body).
    const inexact = findInexactIntegerLiteral(value);
    if (inexact) {
      ctx.addIssue({ code: 'custom', message: `at ${jsonPathName(inexact.path) || 'its top'}: ${inexact.rule}` });
      return z.NEVER;
    }
    return parsed as JsonObjectValue;
  });
};

/** RFC 3339, at most 64 characters (the models' `Timestamp` / `AfterTimestamp`). */
export const Tc3Timestamp = z.string().max(64, 'must be at most 64 characters').pipe(TimestampInput);

/**
 * The deepest Offset served. The rows before it are skipped in the database on their keys alone
 * (an index range, no row read whole), so a request costs O(Offset + Limit) there and O(Limit)
 * here; the cap keeps that first term small whatever the history's size: 10,000 index entries
 * are a few milliseconds. Past it, a client narrows the list instead (AfterTimestamp, Filters) or
 * uses the REST API's page tokens. docs/tencent-api.md, "Offset paging".
 */
export const MAX_OFFSET = 10_000;

/** Offset / Limit, as integers (the SDK sends JSON numbers). */
export const offsetLimit = (defaultLimit: number, maxLimit: number) => ({
  Offset: z
    .number()
    .int('must be an integer')
    .min(0, 'must be 0 or more')
    .max(MAX_OFFSET, `must be at most ${MAX_OFFSET}: deeper pages are not served by offset; narrow the list with its filters (e.g. AfterTimestamp) instead`)
    .default(0),
  Limit: z.number().int('must be an integer').min(1, 'must be at least 1').max(maxLimit, `must be at most ${maxLimit}`).default(defaultLimit),
});

export const Filter = z.strictObject({
  Name: z.string().min(1, 'must not be empty'),
  Values: z.array(z.string()).min(1, 'must hold at least one value'),
});
export type FilterValue = z.infer<typeof Filter>;

/** A part's functionCall sits three levels into an event's content (content.parts[i].functionCall), whose values may nest 255. */
const PART_VALUE_DEPTH = MAX_BODY_NESTING - 1 - 3;

export const MetadataVar = z.strictObject({ Name: z.string(), Value: z.string().default('') });
export type MetadataVarValue = z.infer<typeof MetadataVar>;

/** MetadataVar[] → the service's metadata object; a repeated Name is refused (the models: unique). */
export function metadataObject(items: readonly MetadataVarValue[]): Record<string, string> | string {
  const metadata: Record<string, string> = {};
  for (const [index, item] of items.entries()) {
    if (Object.hasOwn(metadata, item.Name)) return `Metadata[${index}].Name: "${item.Name}" is given twice; names must be unique`;
    metadata[item.Name] = item.Value;
  }
  return metadata;
}

const metadataVars = (metadata: Record<string, string>) => Object.entries(metadata).map(([Name, Value]) => ({ Name, Value }));

const PartInfo = z.strictObject({
  Text: z.string().max(8192, 'must be at most 8192 characters').optional(),
  Thought: z.boolean().optional(),
  FunctionCall: jsonObjectString(8192, PART_VALUE_DEPTH).optional(),
  FunctionResponse: jsonObjectString(8192, PART_VALUE_DEPTH).optional(),
  InlineData: z
    .strictObject({
      MimeType: z.string().max(128, 'must be at most 128 characters'),
      Data: z.string().max(8192, 'must be at most 8192 characters'),
    })
    .optional(),
});

/** EventInfo as AppendEvent takes it. */
export const EventInfoInput = z.strictObject({
  EventId: z.string().optional(),
  InvocationId: z.string().max(128, 'must be at most 128 characters').optional(),
  Author: z.string().max(128, 'must be at most 128 characters').optional(),
  Content: z.strictObject({ Role: z.string().max(64, 'must be at most 64 characters').optional(), Parts: z.array(PartInfo).default([]) }).optional(),
  // StateDeltaMode is not in the models: it carries an event appended with REST's stateDeltaMode
  // "replace" (ADK's semantics: null is stored) through DescribeEvents and back (docs/tencent-api.md).
  Actions: z.strictObject({ StateDelta: jsonObjectString(8192).optional(), StateDeltaMode: z.enum(STATE_DELTA_MODES).optional() }).optional(),
  Metadata: jsonObjectString().optional(),
  Extensions: jsonObjectString(8192).optional(),
  ErrorCode: z.string().max(128, 'must be at most 128 characters').optional(),
  ErrorMessage: z.string().max(2048, 'must be at most 2048 characters').optional(),
  Timestamp: Tc3Timestamp.optional(),
});
export type EventInfoInputValue = z.output<typeof EventInfoInput>;

/**
 * EventInfoInput's fields that hold JSON in a string (jsonObjectString), by the names eventInputOf
 * gives them in the service's input: a rule broken inside one is named by the field, then by the
 * place in its JSON (tc3-validation.ts, pascalPath).
 */
export const EVENT_INFO_JSON_STRINGS: readonly string[] = ['functionCall', 'functionResponse', 'stateDelta', 'metadata', 'extensions'];

const defined = <T extends object>(value: T): T => Object.fromEntries(Object.entries(value).filter(([, item]) => item !== undefined)) as T;

/**
 * An empty optional string the REST field refuses counts as absent: SDKs send a model's unset String
 * fields as "" (ADK's invocation id defaults to ""), and the models set no minimum length.
 */
const emptyAsAbsent = (text: string | undefined): string | undefined => (text === '' ? undefined : text);

/**
 * EventInfo → the REST event input (then validated by the REST schema). An empty EventId counts
 * as absent (generated), as the models say; so do an empty InvocationId, ErrorCode and
 * Content.Role, which no event can hold (ErrorMessage may be empty, as in REST).
 */
export function eventInputOf(info: EventInfoInputValue): Record<string, unknown> {
  return defined({
    eventId: emptyAsAbsent(info.EventId),
    invocationId: emptyAsAbsent(info.InvocationId),
    author: info.Author,
    content: info.Content
      ? defined({
          role: emptyAsAbsent(info.Content.Role),
          parts: info.Content.Parts.map((part) =>
            defined({
              text: part.Text,
              thought: part.Thought,
              functionCall: part.FunctionCall,
              functionResponse: part.FunctionResponse,
              inlineData: part.InlineData ? { mimeType: part.InlineData.MimeType, data: part.InlineData.Data } : undefined,
            }),
          ),
        })
      : undefined,
    actions: info.Actions ? defined({ stateDelta: info.Actions.StateDelta, stateDeltaMode: info.Actions.StateDeltaMode }) : undefined,
    metadata: info.Metadata,
    extensions: info.Extensions,
    errorCode: emptyAsAbsent(info.ErrorCode),
    errorMessage: info.ErrorMessage,
    timestamp: info.Timestamp,
  }) satisfies Partial<Record<keyof EventInputValue, unknown>>;
}

export function toEventInfo(event: EventView) {
  return defined({
    EventId: event.eventId,
    InvocationId: event.invocationId,
    Author: event.author,
    Content: event.content
      ? defined({
          Role: event.content.role,
          Parts: event.content.parts.map((part) =>
            defined({
              Text: part.text,
              Thought: part.thought,
              FunctionCall: part.functionCall ? JSON.stringify(part.functionCall) : undefined,
              FunctionResponse: part.functionResponse ? JSON.stringify(part.functionResponse) : undefined,
              InlineData: part.inlineData ? { MimeType: part.inlineData.mimeType, Data: part.inlineData.data } : undefined,
            }),
          ),
        })
      : undefined,
    Actions:
      event.actions?.stateDelta !== undefined
        ? { StateDelta: JSON.stringify(event.actions.stateDelta), ...(event.actions.stateDeltaMode === 'replace' ? { StateDeltaMode: 'replace' as const } : {}) }
        : undefined,
    Metadata: event.metadata ? JSON.stringify(event.metadata) : undefined,
    Extensions: event.extensions ? JSON.stringify(event.extensions) : undefined,
    ErrorCode: event.errorCode,
    ErrorMessage: event.errorMessage,
    Timestamp: event.timestamp,
  });
}

export function toSessionSpaceInfo(space: SpaceView) {
  return {
    SpaceId: space.spaceId,
    Name: space.name,
    Description: space.description,
    // A space being deleted is gone in one transaction here: never `Deleting`.
    Status: 'Active',
    Default: space.default,
    CreateTime: space.createTime,
    UpdateTime: space.updateTime,
  };
}

/** SessionInfo; a write's answer without contents (no session:DescribeSessions) has no Title, State, Metadata. */
export function toSessionInfo(session: SessionView | WrittenSessionView) {
  return defined({
    SessionId: session.sessionId,
    SpaceId: session.spaceId,
    UserId: session.userId,
    Title: session.title,
    State: session.state ? { CustomState: JSON.stringify(session.state) } : undefined,
    Metadata: session.metadata ? metadataVars(session.metadata) : undefined,
    EventCount: session.eventCount,
    CreateTime: session.createTime,
    UpdateTime: session.updateTime,
  });
}
