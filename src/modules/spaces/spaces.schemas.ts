// Request and response schemas of the spaces API, and the row → API mapping.
import { z } from 'zod';
import type { SpaceRow } from '../../db/schema.js';
import { IncludeTotal, PageToken, SpaceId, Timestamp, pageSize } from '../../http/schemas.js';

export const SPACE_NAME_MAX = 128;
export const SPACE_DESCRIPTION_MAX = 512;
/** Ten years: long enough for any retention policy, small enough to stay far from timestamp overflow. */
export const SPACE_TTL_MAX_SECONDS = 10 * 365 * 24 * 60 * 60;

export const SessionSpace = z
  .object({
    spaceId: SpaceId,
    name: z.string(),
    description: z.string(),
    default: z.boolean().describe('The account\'s default space: it can be renamed, never deleted.'),
    defaultTtlSeconds: z.number().int().nullable().describe('Lifetime given to new sessions that set no expiry; null means they never expire.'),
    createTime: Timestamp,
    updateTime: Timestamp,
  })
  .meta({ id: 'SessionSpace' });

export type SpaceView = z.infer<typeof SessionSpace>;

export function toSpaceView(row: SpaceRow): SpaceView {
  return {
    spaceId: row.space_id,
    name: row.name,
    description: row.description,
    default: row.is_default,
    defaultTtlSeconds: row.default_ttl_seconds,
    createTime: row.create_time.toISOString(),
    updateTime: row.update_time.toISOString(),
  };
}

// zod's trim() runs before the length checks that follow it, so the limits apply to the trimmed name.
const SpaceName = z
  .string()
  .trim()
  .min(1, 'must not be empty or only whitespace')
  .max(SPACE_NAME_MAX, `must be at most ${SPACE_NAME_MAX} characters after trimming`)
  .describe(`1–${SPACE_NAME_MAX} characters; leading and trailing whitespace is removed.`);

const SpaceDescription = z.string().max(SPACE_DESCRIPTION_MAX, `must be at most ${SPACE_DESCRIPTION_MAX} characters`);

const DefaultTtlSeconds = z
  .number()
  .int('must be a whole number of seconds')
  .min(1, 'must be at least 1 second')
  .max(SPACE_TTL_MAX_SECONDS, `must be at most ${SPACE_TTL_MAX_SECONDS} seconds (10 years)`);

export const CreateSpaceBody = z.strictObject({
  name: SpaceName,
  description: SpaceDescription.default('').describe(`At most ${SPACE_DESCRIPTION_MAX} characters (default empty).`),
  defaultTtlSeconds: DefaultTtlSeconds.nullable().optional().describe('Default lifetime of new sessions, in seconds; omitted or null: no expiry.'),
  onNameExists: z
    .enum(['create', 'reuse'])
    .default('create')
    .describe(
      'create (default): names need not be unique, a new space is made. reuse: if a space of this name exists (one the caller may describe), ' +
        'answer 200 with the oldest such space and change nothing; concurrent reuse creates of one name end with one space. ' +
        'Adapters that map an application name to a space (e.g. the ADK session service) use it.',
    ),
});
export type CreateSpaceInput = z.infer<typeof CreateSpaceBody>;

export const ModifySpaceBody = z
  .strictObject({
    name: SpaceName.optional(),
    description: SpaceDescription.optional(),
    defaultTtlSeconds: DefaultTtlSeconds.nullable().optional().describe('null clears the default lifetime.'),
  })
  .refine((body) => body.name !== undefined || body.description !== undefined || body.defaultTtlSeconds !== undefined, {
    message: 'must change at least one of name, description, defaultTtlSeconds',
    // Only for an otherwise valid body: an unknown field is reported alone, not as "nothing to change" too.
    when: (payload) => payload.issues.length === 0,
  });
export type ModifySpaceInput = z.infer<typeof ModifySpaceBody>;


export const ListSpacesQuery = z.strictObject({
  name: z.string().min(1).max(SPACE_NAME_MAX).optional().describe('Exact name.'),
  nameLike: z.string().min(1).max(SPACE_NAME_MAX).optional().describe('Substring of the name, case-sensitive; % and _ are literal.'),
  descriptionLike: z
    .string()
    .min(1)
    .max(SPACE_DESCRIPTION_MAX)
    .optional()
    .describe('Substring of the description, case-sensitive; % and _ are literal.'),
  pageSize: pageSize(20, 100),
  pageToken: PageToken.optional(),
  includeTotal: IncludeTotal,
});
export type ListSpacesInput = z.infer<typeof ListSpacesQuery>;

export const ListSpacesResponse = z.object({
  spaces: z.array(SessionSpace),
  nextPageToken: z.string().optional().describe('Present while more spaces follow.'),
  totalCount: z.number().int().optional().describe('Only with includeTotal=true.'),
});
