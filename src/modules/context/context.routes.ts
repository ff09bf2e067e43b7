// The agent's one call per turn: session, memo and a budgeted window of recent events (docs/design.md §4.7).
import { IfMatchHeaders, SessionPath, errorResponses } from '../../http/schemas.js';
import { etagOf, parseIfMatch } from '../../lib/preconditions.js';
import { sendJsonText, viewSerializerCompiler } from '../../http/view-serializer.js';
import type { ZodApp } from '../../http/zod-app.js';
import { maySeeSessionContents, writtenSessionAnswer, WrittenSession } from '../sessions/index.js';
import { ContextQuery, PutContextBody, SessionContext } from './context.schemas.js';
import { readContext, writeContext } from './context.service.js';

const CONTEXT = '/spaces/:spaceId/users/:userId/sessions/:sessionId/context';

export async function contextRoutes(app: ZodApp): Promise<void> {
  app.get(
    CONTEXT,
    {
      config: { action: 'session:DescribeEvents' },
      serializerCompiler: viewSerializerCompiler,
      schema: {
        tags: ['context'],
        summary: "Read a session's context for the next turn",
        operationId: 'getContext',
        description:
          'The session (merged state), its memo and the newest events from windowStartSeq on, oldest first, chosen from the newest ' +
          'backwards while their JSON stays within maxChars and their number within maxEvents. A function call and its response are ' +
          'kept or dropped together. The newest event is always included; if it alone is over budget its text keeps its last ' +
          'characters and it is marked `truncated: true`. One consistent snapshot; the `ETag` is the session revision.',
        params: SessionPath,
        querystring: ContextQuery,
        response: { 200: SessionContext, ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session') },
      },
    },
    async (request, reply) => {
      const context = await readContext(request.db, { accountId: request.principal.accountId, ...request.params }, request.query);
      return sendJsonText(reply.header('etag', etagOf(context.revision)), context.json);
    },
  );

  app.put(
    CONTEXT,
    {
      config: { action: 'session:ModifySession' },
      schema: {
        tags: ['context'],
        summary: "Store the session's window start and memo",
        operationId: 'putContext',
        description:
          'Give windowStartSeq (1 to eventCount + 1), memo (any JSON up to 64 KiB; null clears it), or both. Increments the revision; ' +
          'answers the session. `If-Match` makes it conditional.',
        params: SessionPath,
        headers: IfMatchHeaders,
        body: PutContextBody,
        response: {
          200: WrittenSession,
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session', 'FailedOperation.PreconditionFailed', 'LimitExceeded.RequestSize', 'UnsupportedMediaType'),
        },
      },
    },
    async (request, reply) => {
      const ifMatch = parseIfMatch(request.headers['if-match']);
      const session = await writeContext(request.db, { accountId: request.principal.accountId, ...request.params }, request.body, ifMatch);
      const answer = writtenSessionAnswer(session, maySeeSessionContents(request.principal, request.params.spaceId));
      return reply.header('etag', etagOf(session.revision)).send(answer);
    },
  );
}
