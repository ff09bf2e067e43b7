// CreateSession, DescribeSession, DescribeSessions, ModifySession, DeleteSession: the sessions
// service behind the ags models.
import { z } from 'zod';
import { AppError } from '../../errors.js';
import { parseJson } from '../../lib/parse-json.js';
import { Identifier, SpaceId } from '../../http/schemas.js';
import {
  maySeeSessionContents,
  writtenSessionAnswer,
  type SessionView,
  sessionSchemas,
  createSession,
  deleteSession,
  describeSession,
  listSessions,
  modifySession,
  VALUE_TOO_LONG,
} from '../sessions/index.js';
import { defineAction } from './tc3-action.js';
import { Tc3Error } from './tc3-errors.js';
import { Filter, type FilterValue, MetadataVar, type MetadataVarValue, Tc3Timestamp, jsonObjectString, metadataObject, offsetLimit, toSessionInfo } from './tc3-models.js';
import { parseServiceInput, pascalPath } from './tc3-validation.js';

const SessionKeyFields = { SpaceId, UserId: Identifier, SessionId: Identifier };
const Metadata = z.array(MetadataVar).max(64, 'must hold at most 64 items');
/** Deprecated in the models; accepted and ignored. */
const AgentId = z.string().optional();

/**
 * The service's metadata issues name `metadata.<key>`; this face's Metadata is a list of Name and
 * Value, so each issue names its item as the client sent it: `Metadata[1].Name` for a rule about the
 * key (an empty one included), `Metadata[1].Value` for one about the value, `Metadata` for the whole.
 */
function renamingMetadata<T>(items: readonly MetadataVarValue[] | undefined, work: () => Promise<T>): Promise<T> {
  return work().catch((error: unknown) => {
    if (error instanceof AppError && error.code === 'InvalidParameter.Metadata') {
      // The service's one source of this code (assertValidMetadata) lists its issues in the details.
      const issues = error.details?.issues as { field: string; message: string }[];
      throw new Tc3Error('InvalidParameter.Metadata', issues.map((issue) => `${metadataItemName(items ?? [], issue)}: ${issue.message}`).join('; '));
    }
    throw error;
  });
}

function metadataItemName(items: readonly MetadataVarValue[], issue: { field: string; message: string }): string {
  const KEYED = 'metadata.';
  if (!issue.field.startsWith(KEYED)) return 'Metadata';
  const name = issue.field.slice(KEYED.length);
  const index = items.findIndex((item) => item.Name === name);
  if (index < 0) return `Metadata (${JSON.stringify(name)})`;
  return `Metadata[${index}].${issue.message === VALUE_TOO_LONG ? 'Value' : 'Name'}`;
}

function metadataOrThrow(items: readonly MetadataVarValue[]): Record<string, string> {
  const metadata = metadataObject(items);
  if (typeof metadata === 'string') throw new Tc3Error('InvalidParameter.Metadata', metadata);
  return metadata;
}

export const createSessionAction = defineAction({
  request: z.strictObject({
    SpaceId,
    UserId: Identifier,
    SessionId: Identifier.optional(),
    Title: z.string().optional(),
    State: z.strictObject({ CustomState: jsonObjectString() }).optional(),
    Metadata: Metadata.optional(),
    AgentId,
  }),
  permission: { action: 'session:CreateSession', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, limits, principal }, input) {
    const body = parseServiceInput(
      sessionSchemas(limits).CreateSessionBody,
      { sessionId: input.SessionId, title: input.Title, state: input.State?.CustomState, metadata: input.Metadata ? metadataOrThrow(input.Metadata) : undefined },
      pascalPath([], { state: 'State.CustomState' }, ['state']),
    );
    const user = { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId };
    // A SessionId that exists answers the original session, unchanged (SPEC 4.1, the product's
    // documented behaviour), rather than the SDK list's InvalidParameter.SessionIdDuplicate.
    const { session } = await renamingMetadata(input.Metadata, () => createSession(db, limits, user, body, false));
    return { Session: toSessionInfo(writtenSessionAnswer(session, maySeeSessionContents(principal, input.SpaceId))) };
  },
});

export const describeSessionAction = defineAction({
  request: z.strictObject({
    ...SessionKeyFields,
    // The response model has no events: the two event fields are checked and have no effect.
    NumRecentEvents: z.number().int('must be an integer').min(0, 'must be 0 or more').max(200, 'must be at most 200').optional(),
    AfterTimestamp: Tc3Timestamp.optional(),
    AgentId,
  }),
  permission: { action: 'session:DescribeSessions', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  sessionNotFound: 'ResourceNotFound.Session',
  async run({ db, principal }, input) {
    const key = { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId, sessionId: input.SessionId };
    const { json } = await describeSession(db, key);
    return { Session: toSessionInfo(parseJson(json) as SessionView) };
  },
});

/** DescribeSessions' Filters as the REST list's query: `metadata:<key>` → `key=value`, title, title-like. */
export function sessionFilterQuery(filters: readonly FilterValue[]): { title?: string; titleLike?: string; metadata: string[] } {
  const seen = new Set<string>();
  const query: { title?: string; titleLike?: string; metadata: string[] } = { metadata: [] };
  for (const [index, filter] of filters.entries()) {
    const at = `Filters[${index}]`;
    if (seen.has(filter.Name)) throw new Tc3Error('InvalidParameterValue', `${at}.Name: "${filter.Name}" is given twice`);
    seen.add(filter.Name);
    if (filter.Name.startsWith('metadata:')) {
      const key = filter.Name.slice('metadata:'.length);
      if (key === '') throw new Tc3Error('InvalidParameterValue', `${at}.Name: metadata:<MetadataKey> needs a key`);
      query.metadata.push(...filter.Values.map((value) => `${key}=${value}`));
      continue;
    }
    if (filter.Name !== 'title' && filter.Name !== 'title-like') {
      throw new Tc3Error('InvalidParameterValue', `${at}.Name: "${filter.Name}" is not a filter of DescribeSessions (metadata:<MetadataKey>, title, title-like)`);
    }
    const blank = filter.Values.findIndex((value) => value.trim() === '');
    if (blank >= 0) throw new Tc3Error('InvalidParameterValue', `${at}.Values[${blank}]: must not be empty or only whitespace`);
    // The sessions service matches one title (or substring) per list.
    if (filter.Values.length > 1) throw new Tc3Error('InvalidParameterValue', `${at}.Values: ${filter.Name} takes one value here`);
    if (filter.Name === 'title') query.title = filter.Values[0]!;
    else query.titleLike = filter.Values[0]!;
  }
  if (query.title !== undefined && query.titleLike !== undefined) throw new Tc3Error('InvalidParameterValue', 'Filters: title and title-like cannot be combined');
  return query;
}

export const describeSessionsAction = defineAction({
  request: z.strictObject({
    SpaceId,
    UserIds: z.array(Identifier).max(100, 'must hold at most 100 items').optional(),
    SessionIds: z.array(Identifier).max(100, 'must hold at most 100 items').optional(),
    ...offsetLimit(20, 100),
    Filters: z
      .array(Filter.extend({ Values: Filter.shape.Values.max(100, 'must hold at most 100 values') }))
      .max(10, 'must hold at most 10 filters')
      .optional(),
    AgentIds: z.array(z.string()).max(100, 'must hold at most 100 items').optional(),
  }),
  permission: { action: 'session:DescribeSessions', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, limits, pageTokens, expensiveSlots, principal }, input) {
    const filters = sessionFilterQuery(input.Filters ?? []);
    const scope = { accountId: principal.accountId, spaceId: input.SpaceId };
    // The Offset is skipped in the database (sessions.repository.ts, listSessionRows).
    const query = parseServiceInput(
      sessionSchemas(limits).ListSpaceSessionsQuery,
      { userId: input.UserIds, sessionId: input.SessionIds, ...filters, metadata: filters.metadata.length ? filters.metadata : undefined, pageSize: input.Limit, includeTotal: 'true' },
      pascalPath([], { userId: 'UserIds', sessionId: 'SessionIds', metadata: 'Filters', title: 'Filters', titleLike: 'Filters' }),
    );
    const page = await expensiveSlots.run(principal.accountId, () => listSessions(db, limits, pageTokens, scope, query, input.Offset));
    // A page the byte budget ended early (sessions.repository.ts, withSharedState): a client that
    // steps Offset by Limit would skip the sessions it left out, so the call is refused instead.
    if (page.sessions.length < query.pageSize && page.nextPageToken !== undefined) {
      throw new Tc3Error(
        'InvalidParameterValue',
        `Limit: the ${query.pageSize} sessions from Offset ${input.Offset} carry more than ${limits.listPageBytes} bytes of state, metadata and memo (MAX_LIST_PAGE_BYTES); the first ${page.sessions.length} fit, ask a Limit of at most that`,
      );
    }
    return { TotalCount: page.totalCount ?? 0, Sessions: page.sessions.map(toSessionInfo) };
  },
});

export const modifySessionAction = defineAction({
  request: z.strictObject({ ...SessionKeyFields, Title: z.string().optional(), Metadata: Metadata.optional() }),
  permission: { action: 'session:ModifySession', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, limits, principal }, input) {
    if (input.Title === undefined && input.Metadata === undefined) throw new Tc3Error('MissingParameter', 'Title, Metadata: give at least one of them');
    const key = { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId, sessionId: input.SessionId };
    const body = parseServiceInput(sessionSchemas(limits).ModifySessionBody, { title: input.Title, metadata: input.Metadata ? metadataOrThrow(input.Metadata) : undefined });
    // Metadata is replaced whole (the model), where the REST PATCH merges: the service's option,
    // inside its one transaction, under the session's lock.
    const session = await renamingMetadata(input.Metadata, () => modifySession(db, key, body, undefined, { replaceMetadata: true }));
    return { Session: toSessionInfo(writtenSessionAnswer(session, maySeeSessionContents(principal, input.SpaceId))) };
  },
});

export const deleteSessionAction = defineAction({
  request: z.strictObject({ ...SessionKeyFields, AgentId }),
  permission: { action: 'session:DeleteSession', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, principal }, input) {
    await deleteSession(db, { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId, sessionId: input.SessionId }, undefined);
    return {};
  },
});
