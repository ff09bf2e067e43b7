// Request and response schemas of the sessions routes. Limits that are configurable (title length,
// filter counts) come from the running configuration, so the schemas are built per app.
import { z } from 'zod';
import type { Limits } from '../../config.js';
import { Identifier, JsonValue, IncludeTotal, JsonObject, PageToken, TimestampInput, pageSize, repeatable } from '../../http/schemas.js';
import { Session } from './session.model.js';

/** Upper bound of a TTL (10 years): far beyond any real use, and safe for timestamp arithmetic. */
export const MAX_TTL_SECONDS = 10 * 365 * 24 * 3600;


// Header schemas are loose: Fastify replaces request.headers with the parsed value.
export const CreateHeaders = z.looseObject({
  'if-none-match': z.string().optional().describe('`*`: answer 412 instead of 200 when the session already exists.'),
});

const MetadataValues = z.record(z.string(), z.string()).describe('String → string; see the metadata rules (docs/design.md §4.5).');
const TtlSeconds = z.number().int().min(1).max(MAX_TTL_SECONDS).describe('Expire this many seconds from now.');

// Built once per Limits object: the API 3.0 face asks for them on every request, and their
// validators are compiled once per schema object (lib/compiled-schema.ts).
const builtSchemas = new WeakMap<Limits, ReturnType<typeof buildSessionSchemas>>();

/** The schemas for `limits`, the same objects on every call with the same `limits`. */
export function sessionSchemas(limits: Limits): ReturnType<typeof buildSessionSchemas> {
  let schemas = builtSchemas.get(limits);
  if (!schemas) {
    schemas = buildSessionSchemas(limits);
    builtSchemas.set(limits, schemas);
  }
  return schemas;
}

function buildSessionSchemas(limits: Limits) {
  const Title = z.string().max(limits.titleChars).describe(`At most ${limits.titleChars} characters.`);

  const CreateSessionBody = z.strictObject({
    sessionId: Identifier.optional().describe('Chosen by the caller (idempotency key), or generated (UUIDv7).'),
    title: Title.optional(),
    metadata: MetadataValues.optional(),
    state: JsonObject.optional().describe(`Initial session state; at most ${limits.stateBytes} bytes serialized.`),
    expireTime: TimestampInput.optional().describe('When the session expires; must be in the future. Not with ttlSeconds.'),
    ttlSeconds: TtlSeconds.optional(),
  });

  const ModifySessionBody = z.strictObject({
    title: Title.optional(),
    metadata: z
      .record(z.string(), z.string().nullable())
      .optional()
      .describe('A merge patch of the metadata: a string sets the key, null removes it.'),
    memo: JsonValue.optional().describe('The application\'s memo (any JSON, at most 64 KiB serialized); null clears it.'),
    expireTime: TimestampInput.nullable().optional().describe('New expiry (in the future), or null to never expire. Not with ttlSeconds.'),
    ttlSeconds: TtlSeconds.optional(),
  });

  const filterValues = limits.filterValues;
  const commonFilters = {
    title: z.string().optional().describe('Exact title.'),
    titleLike: z.string().min(1).optional().describe('Title contains this text (case-sensitive; % and _ are literal). Not with title.'),
    // Each metadata key is a filter of its own: ≤ filterValues values per key (checked with the keys), ≤ filters keys.
    metadata: repeatable(z.string(), filterValues * limits.filters)
      .optional()
      .describe(
        `\`key=value\`, exact match; repeatable: one key → any of its values (≤${filterValues} per key), several keys → all of them ` +
          `(each key counts as one of the ≤${limits.filters} filters).`,
      ),
    updatedAfter: TimestampInput.optional().describe('Updated strictly after this time.'),
    updatedBefore: TimestampInput.optional().describe('Updated strictly before this time.'),
    orderBy: z.enum(['updateTime', 'createTime']).default('updateTime'),
    order: z.enum(['desc', 'asc']).default('desc'),
    pageSize: pageSize(20, 100),
    pageToken: PageToken.optional(),
    includeTotal: IncludeTotal,
  };

  const ListUserSessionsQuery = z.strictObject(commonFilters);
  const ListSpaceSessionsQuery = z.strictObject({
    ...commonFilters,
    userId: repeatable(Identifier, filterValues).optional().describe(`Only these users (repeatable, ≤${filterValues}).`),
    sessionId: repeatable(Identifier, filterValues).optional().describe(`Only these session ids (repeatable, ≤${filterValues}).`),
  });

  return { CreateSessionBody, ModifySessionBody, ListUserSessionsQuery, ListSpaceSessionsQuery };
}

export type SessionSchemas = ReturnType<typeof sessionSchemas>;
export type CreateSessionInput = z.infer<SessionSchemas['CreateSessionBody']>;
export type ModifySessionInput = z.infer<SessionSchemas['ModifySessionBody']>;
export type ListSessionsQuery = z.infer<SessionSchemas['ListSpaceSessionsQuery']>;

export const SessionList = z.object({
  sessions: z.array(Session),
  nextPageToken: z.string().optional().describe('Present while more sessions follow.'),
  totalCount: z.number().int().optional().describe('With includeTotal=true: how many sessions match the filters.'),
});
