import { SessionPath, errorResponses } from '../../http/schemas.js';
import { etagOf, parseIfMatch } from '../../lib/preconditions.js';
import { RAW_JSON_SLOT, jsonWithRawValue, sendJsonPieces, sendJsonText, viewSerializerCompiler } from '../../http/view-serializer.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import type { AppendDeps } from './append.service.js';
import { maySeeSessionContents, writtenSessionAnswer } from '../sessions/index.js';
import { recordAppend } from './append-metrics.js';
import { Event } from './event.model.js';
import {
  AppendEventsResponse,
  EventPath,
  IfMatchHeaders,
  ListEventsQuery,
  ListEventsResponse,
  appendEventsBody,
  appendEventsValidatorCompiler,
} from './events.schemas.js';
import { getSessionEvent, listSessionEventsJson } from './events.service.js';

const EVENTS = '/spaces/:spaceId/users/:userId/sessions/:sessionId/events';

export async function eventsRoutes(app: ZodApp, { limits, metrics, pageTokens, eventFeed, appendPath }: AppDeps & AppendDeps): Promise<void> {
  app.post(
    EVENTS,
    {
      config: { action: 'session:AppendEvent' },
      // Picks the single or batch shape by the `events` key, so errors name the real field.
      validatorCompiler: appendEventsValidatorCompiler(limits.batchEvents),
      // The answer is built by the typed view functions from what was written (view-serializer.ts).
      serializerCompiler: viewSerializerCompiler,
      schema: {
        tags: ['events'],
        summary: 'Append one event or an atomic batch',
        operationId: 'appendEvents',
        description:
          'Assigns gap-free `seq` numbers, applies each `stateDelta` in order and bumps the session\'s eventCount, revision and ' +
          'updateTime, all in one transaction. An `eventId` already stored with the same payload is a replay: the stored event is ' +
          'returned and its delta is not applied again (200 when every event is a replay); with another payload it is a 409. ' +
          '`If-Match` is checked only when something would be written, so retrying a request whose response was lost is safe. ' +
          'The session\'s title, metadata, state and memo are in the answer only if the caller may also describe sessions ' +
          '(session:DescribeSessions); the events are always the ones the request wrote or replayed.',
        params: SessionPath,
        headers: IfMatchHeaders,
        body: appendEventsBody(limits.batchEvents),
        response: {
          200: AppendEventsResponse.describe('Every event was a replay; nothing changed.'),
          201: AppendEventsResponse.describe('Appended.'),
          ...errorResponses(
            'InvalidParameter.StateDelta',
            'ResourceNotFound.SessionSpace',
            'ResourceNotFound.Session',
            'InvalidParameter.EventIdDuplicate',
            'FailedOperation.PreconditionFailed',
            'LimitExceeded.RequestSize',
            'LimitExceeded.Event',
            'LimitExceeded.State',
            'UnsupportedMediaType',
          ),
        },
      },
    },
    async (request, reply) => {
      const key = { accountId: request.principal.accountId, ...request.params };
      const result = await appendPath.append(key, request.body, parseIfMatch(request.headers['if-match']));
      recordAppend(metrics.appends, result);
      // This instance's open streams of the session look at once (other instances' on their next poll).
      if (!result.replayOnly) eventFeed.appended(key, result.session.eventCount);
      reply.header('etag', etagOf(result.session.revision));
      // The merged state is JSON text from the database, spliced into the answer as it is (when the
      // caller may see the session's contents at all).
      const session = maySeeSessionContents(request.principal, key.spaceId)
        ? { ...result.session, state: RAW_JSON_SLOT }
        : writtenSessionAnswer({ ...result.session, state: {} }, false);
      return sendJsonText(reply.status(result.replayOnly ? 200 : 201), jsonWithRawValue({ events: result.events, session }, result.stateJson));
    },
  );

  app.get(
    EVENTS,
    {
      config: { action: 'session:DescribeEvents' },
      schema: {
        tags: ['events'],
        summary: 'List a session\'s events',
        operationId: 'listEvents',
        description: 'Ordered by seq (keyset paging). Filters combine with AND; time filters apply to the event timestamp. A page carries at most MAX_LIST_PAGE_BYTES (default 4 MiB) of events (their content, actions, metadata, extensions and error message): with large events it holds fewer than pageSize, at least one, and nextPageToken goes on from its last.',
        params: SessionPath,
        querystring: ListEventsQuery,
        response: {
          200: ListEventsResponse,
          ...errorResponses('InvalidParameter.PageToken', 'ResourceNotFound.SessionSpace', 'ResourceNotFound.Session'),
        },
      },
    },
    async (request, reply) => sendJsonPieces(reply, await listSessionEventsJson(request.db, pageTokens, limits.listPageBytes, { accountId: request.principal.accountId, ...request.params }, request.query)),
  );

  app.get(
    `${EVENTS}/:eventId`,
    {
      config: { action: 'session:DescribeEvents' },
      schema: {
        tags: ['events'],
        summary: 'Describe one event',
        operationId: 'describeEvent',
        params: EventPath,
        response: {
          200: Event,
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session', 'ResourceNotFound.Event'),
        },
      },
    },
    async (request) => {
      const { eventId, ...session } = request.params;
      return getSessionEvent(request.db, { accountId: request.principal.accountId, ...session }, eventId);
    },
  );
}
