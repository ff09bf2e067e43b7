// GET …/sessions/{sessionId}/state-at/{seq}: the session's state right after one event.
import { z } from 'zod';
import { JsonObject, JsonValue, SessionPath, errorResponses } from '../../http/schemas.js';
import { RAW_JSON_SLOT, jsonWithRawValue, sendJsonText, viewSerializerCompiler } from '../../http/view-serializer.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { Event } from './event.model.js';
import { createSingleFlight } from '../../lib/single-flight.js';
import { getStateAtEvent } from './state-history.service.js';

const StateAtPath = SessionPath.extend({
  seq: z.coerce.number().int().min(1).describe('The seq of the event.'),
});

const StateChange = z
  .object({
    path: z.array(z.string()).describe('The keys from the top of the state down to the value that changed.'),
    kind: z.enum(['added', 'removed', 'changed']),
    before: JsonValue.optional().describe('The value before the event (absent when added).'),
    after: JsonValue.optional().describe('The value after the event (absent when removed).'),
  })
  .meta({ id: 'StateChange' });

export const StateAtEventResponse = z
  .object({
    event: Event,
    state: JsonObject.describe('The session-scoped state right after the event.'),
    changes: z.array(StateChange).describe('What the event changed in the session-scoped state, value by value.'),
    sharedDelta: z
      .object({ user: JsonObject, app: JsonObject })
      .describe('The event\'s delta to the shared `user:` and `app:` states. Their values at that time are not kept: other sessions write them too.'),
    initialStateKnown: z
      .boolean()
      .describe('false for sessions created before this service kept initial states, and for imported sessions: the replay then starts from {}.'),
  })
  .meta({ id: 'StateAtEvent' });

export async function stateHistoryRoutes(app: ZodApp, { metrics, expensiveSlots }: AppDeps): Promise<void> {
  const checkpointWriters = createSingleFlight();
  app.get(
    '/spaces/:spaceId/users/:userId/sessions/:sessionId/state-at/:seq',
    {
      config: { action: 'session:DescribeEvents' },
      // The answer is built by typed functions from stored, validated JSON, its state the text
      // PostgreSQL wrote (view-serializer.ts): a zod walk, or a parse and a JSON.stringify, of a
      // state of up to 1 MiB would hold the event loop, and every other account's requests, longer
      // than the replay holds the database (bench:neighbours, attack 2). Error answers still go
      // through this serializer.
      serializerCompiler: viewSerializerCompiler,
      schema: {
        tags: ['events'],
        summary: 'The session state right after one event',
        operationId: 'getStateAtEvent',
        description:
          'Replays, in the database, the state the session was created with and the stateDelta of each event up to and including `seq`, ' +
          'in seq order, by the same merge the append uses, and answers the session-scoped state then, the event itself and what it ' +
          'changed. Nothing of the history is downloaded. The replay starts from the greatest checkpoint of the folded state below ' +
          '`seq` (one every 1,000 events, written by earlier replays) and no statement folds more than 1,000 events: the first ' +
          'replay over a stretch of history writes the checkpoints it passes, later ones fold fewer than 1,000 events. ' +
          'Authorized like reading the events (session:DescribeEvents), since the deltas it replays are in them.',
        params: StateAtPath,
        response: {
          200: StateAtEventResponse,
          ...errorResponses('ResourceNotFound.SessionSpace', 'ResourceNotFound.Session', 'ResourceNotFound.Event'),
        },
      },
    },
    async (request, reply) => {
      const { seq, ...session } = request.params;
      const { accountId } = request.principal;
      // A replay reads many rows: one of the account's expensive slots (src/lib/account-slots.ts).
      const { event, stateJson, changes, sharedDelta, initialStateKnown } = await expensiveSlots.run(accountId, () =>
        getStateAtEvent(request.db, metrics.stateAt, { accountId, ...session }, seq, checkpointWriters),
      );
      return sendJsonText(reply, jsonWithRawValue({ event, state: RAW_JSON_SLOT, changes, sharedDelta, initialStateKnown }, stateJson));
    },
  );
}
