// GET …/events/stream: the session's events as server-sent events (event-stream.service.ts).
import { PassThrough } from 'node:stream';
import { z } from 'zod';
import { SessionPath, errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { acceptedMediaRanges } from '../../lib/media-ranges.js';
import type { Action } from '../../lib/policy.js';
import { STREAM_LIFETIME_EXCEEDED, type StreamSink } from './event-stream.service.js';
import { getSessionEvent } from './events.service.js';

/** The action a stream is authorized for, when it opens and at every heartbeat. */
export const EVENT_STREAM_ACTION = 'session:DescribeEvents' satisfies Action;

const SeqCursor = z.coerce.number().int().min(0); // int() bounds it to safe integers

export const EventStreamQuery = z.strictObject({
  afterSeq: SeqCursor.optional().describe('Start after this seq (default 0: the whole history first). Last-Event-ID, when sent, takes precedence.'),
});

const EventStreamHeaders = z.looseObject({
  'last-event-id': SeqCursor.optional().describe('The seq of the last event received: a reconnecting client resumes right after it.'),
});

/** The SSE text the stream writes; the OpenAPI document gives it the text/event-stream media type (openapi-document.ts). */
const EventStreamText = z
  .string()
  .describe(
    'text/event-stream. Each event is a frame `id: <seq>`, `event: event`, `data: <the Event as JSON>`; a `: heartbeat` comment comes ' +
      'at least every heartbeat interval; a final `event: end` frame (data `{"reason": "<code>"}`) says why the server ended the stream: ' +
      '`ResourceNotFound.Session` (the session is gone), `AuthFailure`, `UnauthorizedOperation` or `ResourceNotFound.SessionSpace` (what a new ' +
      `request would now get), \`${STREAM_LIFETIME_EXCEEDED}\` (the maximum lifetime is over: reconnect with Last-Event-ID) or ` +
      '`ResourceUnavailable.Database` (reconnect with Last-Event-ID).',
  );

// Whether an Accept header asks for JSON and not for an event stream: application/json (or
// application/*) with q > 0, and no range that takes text/event-stream (itself, text/*, or the
// any-type range) with q > 0. No header, EventSource's text/event-stream and curl's any-type
// range all want the stream.
const EVENT_STREAM_RANGES = new Set(['text/event-stream', 'text/*', '*/*']);
const JSON_RANGES = new Set(['application/json', 'application/*']);

function acceptsJsonNotEventStream(accept: string | undefined): boolean {
  const ranges = acceptedMediaRanges(accept);
  return ranges.some(({ range }) => JSON_RANGES.has(range)) && !ranges.some(({ range }) => EVENT_STREAM_RANGES.has(range));
}

export async function eventStreamRoutes(app: ZodApp, { eventStreams }: AppDeps): Promise<void> {
  app.get(
    '/spaces/:spaceId/users/:userId/sessions/:sessionId/events/stream',
    {
      config: { action: EVENT_STREAM_ACTION },
      schema: {
        tags: ['events'],
        summary: 'Follow a session\'s events as they are appended (server-sent events)',
        operationId: 'streamEvents',
        description:
          'Sends the stored events after `afterSeq` (or after `Last-Event-ID`), then every new event as it is appended, each exactly once and ' +
          'in seq order; the SSE id of each event is its seq, so a client that reconnects with Last-Event-ID misses nothing. Authorized like ' +
          'listing the events (session:DescribeEvents) when the stream opens, and again at every heartbeat exactly as a new request would be: ' +
          'a deleted or disabled credential, a deleted sub-account or a policy that no longer allows it ends the stream within one heartbeat ' +
          'with an `end` frame naming the code. An open stream holds no database connection while it waits: the streams of a session share ' +
          'one read of its new events. The stream is ended when the session is deleted or expires, after its maximum lifetime ' +
          '(EVENT_STREAM_MAX_LIFETIME_MS, default 30 min; reason `' + STREAM_LIFETIME_EXCEEDED + '`) and when the server shuts down (no frame: ' +
          'reconnect). An account may have EVENT_STREAM_MAX_PER_ACCOUNT streams open on an instance (default 100), and an instance serves ' +
          'EVENT_STREAM_MAX_PER_INSTANCE (default 1,000); past either the answer is 429 `RequestLimitExceeded` with Retry-After. ' +
          'Agent instances can use it to wait for another instance\'s turn instead of polling. A request whose Accept header takes ' +
          'application/json but not text/event-stream (nor text/* or */*) is answered as `GET …/events/{eventId}` for the eventId `stream`: ' +
          'the event, or 404 ResourceNotFound.Event.',
        params: SessionPath,
        querystring: EventStreamQuery,
        headers: EventStreamHeaders,
        response: {
          200: EventStreamText,
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session', 'ResourceNotFound.Event', 'RequestLimitExceeded'),
        },
      },
    },
    async (request, reply) => {
      const key = { accountId: request.principal.accountId, ...request.params };
      // The path is also that of the event whose eventId is "stream" (GET …/events/{eventId}): a
      // client that accepts JSON and not an event stream (an SDK's describeEvent) gets that event,
      // not a stream it would wait on forever.
      if (acceptsJsonNotEventStream(request.headers.accept)) {
        const event = await getSessionEvent(request.db, key, 'stream');
        return reply.type('application/json; charset=utf-8').serializer(JSON.stringify).send(event as unknown as string);
      }
      const afterSeq = request.headers['last-event-id'] ?? request.query.afterSeq ?? 0;
      const body = new PassThrough();
      // One wait for 'drain' shared by every write made while the client is behind (a heartbeat
      // to a client that reads nothing must not add listeners every interval).
      let drained: Promise<void> | undefined;
      const sink: StreamSink = {
        async write(chunk) {
          if (body.destroyed || body.writableEnded || body.write(chunk)) return;
          // Waits for the client to take what is buffered, or to go away.
          drained ??= new Promise<void>((resolve) => {
            const done = () => {
              body.off('drain', done);
              body.off('close', done);
              drained = undefined;
              resolve();
            };
            body.on('drain', done);
            body.on('close', done);
          });
          await drained;
        },
        end: () => body.end(),
      };
      const stream = await eventStreams.open(key, afterSeq, sink, request.headers.authorization);
      reply.raw.on('close', () => stream.close());
      // The client may have gone while the stream opened: its 'close' has then already been emitted.
      if (request.raw.destroyed || reply.raw.destroyed) stream.close();
      reply
        .header('content-type', 'text/event-stream; charset=utf-8')
        .header('cache-control', 'no-cache, no-transform')
        .header('x-accel-buffering', 'no'); // a proxy must pass each frame on at once
      return reply.send(body as unknown as string);
    },
  );
}
