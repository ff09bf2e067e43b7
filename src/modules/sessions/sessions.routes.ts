// Sessions of a space's business users: idempotent create, describe, modify, delete, and lists.
import { z } from 'zod';
import { invalidParameter } from '../../errors.js';
import { IfMatchHeaders, SessionPath, SpacePath, UserPath, errorResponses } from '../../http/schemas.js';
import { etagOf, parseIfMatch } from '../../lib/preconditions.js';
import { sendJsonPieces, sendJsonText } from '../../http/view-serializer.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { maySeeSessionContents, writtenSessionAnswer } from './session-disclosure.js';
import { Session, WrittenSession } from './session.model.js';
import { CreateHeaders, SessionList, sessionSchemas } from './sessions.schemas.js';
import { createSession, deleteSession, describeSession, listSessionsJson, modifySession } from './sessions.service.js';

const USER_SESSIONS = '/spaces/:spaceId/users/:userId/sessions';
const ONE_SESSION = `${USER_SESSIONS}/:sessionId`;

export async function sessionsRoutes(app: ZodApp, { limits, pageTokens, expensiveSlots }: AppDeps): Promise<void> {
  const schemas = sessionSchemas(limits);
  // A list is three statements (space, page, count) on one pool: 100 concurrent lists queued every
  // append behind them (bench/list-contention.ts). At most limits.listConcurrency lists query at
  // once (expensiveSlots, shared with the API 3.0 face, at most limits.expensivePerAccount for one
  // account); the others wait here, outside the pool's queue, so appends keep their connections.

  app.post(
    USER_SESSIONS,
    {
      config: { action: 'session:CreateSession' },
      // A POST without any body creates a session with every default (a generated id).
      preValidation: async (request) => {
        if (request.body === undefined || request.body === null) request.body = {};
      },
      schema: {
        tags: ['sessions'],
        summary: 'Create a session (idempotent)',
        operationId: 'createSession',
        description:
          'A new sessionId answers 201. An existing one answers 200 with the session unchanged (the request fields are ignored), ' +
          'or 412 with `If-None-Match: *`. An expired session with that id is replaced. Without a sessionId one is generated. ' +
          'Without expireTime or ttlSeconds the space\'s defaultTtlSeconds applies, if it has one. Title, metadata, state and memo ' +
          'are answered only to a caller that may describe sessions (session:DescribeSessions).',
        params: UserPath,
        headers: CreateHeaders,
        body: schemas.CreateSessionBody,
        response: {
          201: WrittenSession.describe('Created.'),
          200: WrittenSession.describe('The session already existed; it is answered unchanged.'),
          ...errorResponses('InvalidParameter.Metadata', 'ResourceNotFound.SessionSpace', 'FailedOperation.PreconditionFailed', 'LimitExceeded.State', 'LimitExceeded.RequestSize', 'UnsupportedMediaType'),
        },
      },
    },
    async (request, reply) => {
      const ifNoneMatch = request.headers['if-none-match'];
      if (ifNoneMatch !== undefined && ifNoneMatch.trim() !== '*') throw invalidParameter('If-None-Match', 'only * is supported here');
      const { spaceId, userId } = request.params;
      const { session, created } = await createSession(request.db, limits, { accountId: request.principal.accountId, spaceId, userId }, request.body, ifNoneMatch !== undefined);
      const answer = writtenSessionAnswer(session, maySeeSessionContents(request.principal, spaceId));
      return reply.status(created ? 201 : 200).header('etag', etagOf(session.revision)).send(answer);
    },
  );

  app.get(
    USER_SESSIONS,
    {
      config: { action: 'session:DescribeSessions' },
      schema: {
        tags: ['sessions'],
        summary: "List one user's sessions",
        operationId: 'listSessions',
        description: 'Newest update first by default. Expired sessions are never listed. A page carries at most MAX_LIST_PAGE_BYTES (default 4 MiB) of states (each session\'s merged state), metadata and memo: with large states it holds fewer than pageSize sessions, at least one, and nextPageToken goes on from its last.',
        params: UserPath,
        querystring: schemas.ListUserSessionsQuery,
        response: { 200: SessionList, ...errorResponses('InvalidParameter.PageToken', 'ResourceNotFound.SessionSpace') },
      },
    },
    async (request, reply) => {
      const { spaceId, userId } = request.params;
      const pieces = await expensiveSlots.run(request.principal.accountId, () => listSessionsJson(request.db, limits, pageTokens, { accountId: request.principal.accountId, spaceId, userId }, request.query));
      return sendJsonPieces(reply, pieces);
    },
  );

  app.get(
    '/spaces/:spaceId/sessions',
    {
      config: { action: 'session:DescribeSessions' },
      schema: {
        tags: ['sessions'],
        summary: "List a space's sessions (admin view)",
        operationId: 'listSpaceSessions',
        description: 'All users\' sessions, optionally only some users or session ids. Expired sessions are never listed. A page carries at most MAX_LIST_PAGE_BYTES (default 4 MiB) of states (each session\'s merged state), metadata and memo: with large states it holds fewer than pageSize sessions, at least one, and nextPageToken goes on from its last.',
        params: SpacePath,
        querystring: schemas.ListSpaceSessionsQuery,
        response: { 200: SessionList, ...errorResponses('InvalidParameter.PageToken', 'ResourceNotFound.SessionSpace') },
      },
    },
    async (request, reply) => {
      const pieces = await expensiveSlots.run(request.principal.accountId, () => listSessionsJson(request.db, limits, pageTokens, { accountId: request.principal.accountId, spaceId: request.params.spaceId }, request.query));
      return sendJsonPieces(reply, pieces);
    },
  );

  app.get(
    ONE_SESSION,
    {
      config: { action: 'session:DescribeSessions' },
      schema: {
        tags: ['sessions'],
        summary: 'Describe a session',
        operationId: 'describeSession',
        description: 'The `ETag` header carries the revision, for `If-Match` on later changes.',
        params: SessionPath,
        response: { 200: Session, ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session') },
      },
    },
    async (request, reply) => {
      const session = await describeSession(request.db, { accountId: request.principal.accountId, ...request.params });
      return sendJsonText(reply.header('etag', etagOf(session.revision)), session.json);
    },
  );

  app.patch(
    ONE_SESSION,
    {
      config: { action: 'session:ModifySession' },
      schema: {
        tags: ['sessions'],
        summary: 'Change title, metadata, memo or expiry',
        operationId: 'modifySession',
        description: 'Metadata is a merge patch (null removes a key). Every change increments the revision.',
        params: SessionPath,
        headers: IfMatchHeaders,
        body: schemas.ModifySessionBody,
        response: {
          200: WrittenSession,
          ...errorResponses('InvalidParameter.Metadata', 'ResourceNotFound.SessionSpace', 'ResourceNotFound.Session', 'FailedOperation.PreconditionFailed', 'LimitExceeded.RequestSize', 'UnsupportedMediaType'),
        },
      },
    },
    async (request, reply) => {
      const ifMatch = parseIfMatch(request.headers['if-match']);
      const session = await modifySession(request.db, { accountId: request.principal.accountId, ...request.params }, request.body, ifMatch);
      const answer = writtenSessionAnswer(session, maySeeSessionContents(request.principal, request.params.spaceId));
      return reply.header('etag', etagOf(session.revision)).send(answer);
    },
  );

  app.delete(
    ONE_SESSION,
    {
      config: { action: 'session:DeleteSession' },
      schema: {
        tags: ['sessions'],
        summary: 'Delete a session and its events',
        operationId: 'deleteSession',
        params: SessionPath,
        headers: IfMatchHeaders,
        response: {
          204: z.null().describe('Deleted.'),
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session', 'FailedOperation.PreconditionFailed'),
        },
      },
    },
    async (request, reply) => {
      const ifMatch = parseIfMatch(request.headers['if-match']);
      await deleteSession(request.db, { accountId: request.principal.accountId, ...request.params }, ifMatch);
      return reply.status(204).send(null);
    },
  );
}
