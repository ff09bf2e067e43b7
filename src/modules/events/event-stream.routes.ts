// GET …/events/stream: the session's events as server-sent events (event-stream.service.ts).
import { PassThrough } from 'node:stream';
import { z } from 'zod';
import { SessionPath, errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { openEventStream, type StreamSink } from './event-stream.service.js';

const SeqCursor = z.coerce.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

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
      'at least every heartbeat interval; a final `event: end` frame (data `{"reason": "ResourceNotFound.Session"}`) says the session is gone.',
  );

export async function eventStreamRoutes(app: ZodApp, { db, eventFeed, eventStreamHeartbeatMs, onAppClose }: AppDeps): Promise<void> {
  app.get(
    '/spaces/:spaceId/users/:userId/sessions/:sessionId/events/stream',
    {
      config: { action: 'session:DescribeEvents' },
      schema: {
        tags: ['events'],
        summary: 'Follow a session\'s events as they are appended (server-sent events)',
        operationId: 'streamEvents',
        description:
          'Sends the stored events after `afterSeq` (or after `Last-Event-ID`), then every new event as it is appended, each exactly once and ' +
          'in seq order; the SSE id of each event is its seq, so a client that reconnects with Last-Event-ID misses nothing. Authorized like ' +
          'listing the events (session:DescribeEvents), once, when the stream opens. An open stream holds no database connection while it ' +
          'waits: one listening connection per instance wakes the streams of the session an append wrote to. The stream is ended when the ' +
          'session is deleted or expires (an `end` frame) and when the server shuts down (no frame: reconnect). Agent instances can use it ' +
          'to wait for another instance\'s turn instead of polling.',
        params: SessionPath,
        querystring: EventStreamQuery,
        headers: EventStreamHeaders,
        response: {
          200: EventStreamText,
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session'),
        },
      },
    },
    async (request, reply) => {
      const key = { accountId: request.principal.accountId, ...request.params };
      const afterSeq = request.headers['last-event-id'] ?? request.query.afterSeq ?? 0;
      const body = new PassThrough();
      const sink: StreamSink = {
        async write(text) {
          if (body.destroyed || body.writableEnded || body.write(text)) return;
          // Waits for the client to take what is buffered, or to go away.
          await new Promise<void>((resolve) => {
            const done = () => {
              body.off('drain', done);
              body.off('close', done);
              resolve();
            };
            body.on('drain', done);
            body.on('close', done);
          });
        },
        end: () => body.end(),
      };
      const stream = await openEventStream(db, eventFeed, key, afterSeq, sink, { heartbeatMs: eventStreamHeartbeatMs });
      const forget = onAppClose(() => stream.close());
      reply.raw.on('close', () => stream.close());
      void stream.ended.then(forget);
      reply
        .header('content-type', 'text/event-stream; charset=utf-8')
        .header('cache-control', 'no-cache, no-transform')
        .header('x-accel-buffering', 'no'); // a proxy must pass each frame on at once
      return reply.send(body as unknown as string);
    },
  );
}
