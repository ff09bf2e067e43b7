// AppendEvent and DescribeEvents: the events services behind the ags models.
import { z } from 'zod';
import { Identifier, SpaceId } from '../../http/schemas.js';
import { recordAppend, EventInput, ListEventsQuery, listSessionEvents } from '../events/index.js';
import { defineAction } from './tc3-action.js';
import { EventInfoInput, Tc3Timestamp, eventInputOf, offsetLimit, toEventInfo } from './tc3-models.js';
import { parseServiceInput, pascalPath } from './tc3-validation.js';

const SessionKeyFields = { SpaceId, UserId: Identifier, SessionId: Identifier, AgentId: z.string().optional() };

export const appendEventAction = defineAction({
  request: z.strictObject({ ...SessionKeyFields, Event: EventInfoInput }),
  permission: { action: 'session:AppendEvent', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  sessionNotFound: 'ResourceNotFound.Session',
  async run({ metrics, eventFeed, appendPath, principal }, input) {
    const event = parseServiceInput(EventInput, eventInputOf(input.Event), pascalPath(['Event']));
    const key = { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId, sessionId: input.SessionId };
    const result = await appendPath.append(key, event, undefined);
    recordAppend(metrics.appends, result);
    if (!result.replayOnly) eventFeed.appended(key, result.session.eventCount);
    return { Event: toEventInfo(result.events[0]!) };
  },
});

export const describeEventsAction = defineAction({
  request: z.strictObject({ ...SessionKeyFields, Author: z.string().optional(), AfterTimestamp: Tc3Timestamp.optional(), ...offsetLimit(50, 200) }),
  permission: { action: 'session:DescribeEvents', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  async run({ db, pageTokens, principal }, input) {
    const key = { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId, sessionId: input.SessionId };
    // Oldest first (by seq), the order the history was written in; the Offset is skipped in the database.
    const query = parseServiceInput(
      ListEventsQuery,
      { author: input.Author, after: input.AfterTimestamp, order: 'asc', pageSize: input.Limit, includeTotal: 'true' },
      pascalPath([], { after: 'AfterTimestamp' }),
    );
    const page = await listSessionEvents(db, pageTokens, key, query, input.Offset);
    return { Events: page.events.map(toEventInfo), TotalCount: page.totalCount ?? 0 };
  },
});
