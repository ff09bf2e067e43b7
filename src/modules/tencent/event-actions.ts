// AppendEvent and DescribeEvents: the events services behind the ags models.
import { z } from 'zod';
import { Identifier, SpaceId } from '../../http/schemas.js';
import { recordAppend, EventInput, ListEventsQuery, listSessionEvents } from '../events/index.js';
import { defineAction } from './tc3-action.js';
import { Tc3Error } from './tc3-errors.js';
import { EVENT_INFO_JSON_STRINGS, EventInfoInput, Tc3Timestamp, eventInputOf, offsetLimit, toEventInfo } from './tc3-models.js';
import { parseServiceInput, pascalPath } from './tc3-validation.js';

const SessionKeyFields = { SpaceId, UserId: Identifier, SessionId: Identifier, AgentId: z.string().optional() };

export const appendEventAction = defineAction({
  request: z.strictObject({ ...SessionKeyFields, Event: EventInfoInput }),
  permission: { action: 'session:AppendEvent', scope: 'space' },
  spaceIdOf: (input) => input.SpaceId,
  sessionNotFound: 'ResourceNotFound.Session',
  async run({ metrics, eventFeed, appendPath, principal }, input) {
    const event = parseServiceInput(EventInput, eventInputOf(input.Event), pascalPath(['Event'], {}, EVENT_INFO_JSON_STRINGS));
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
  async run({ db, limits, pageTokens, principal }, input) {
    const key = { accountId: principal.accountId, spaceId: input.SpaceId, userId: input.UserId, sessionId: input.SessionId };
    // Oldest first (by seq), the order the history was written in; the Offset is skipped in the database.
    const query = parseServiceInput(
      ListEventsQuery,
      { author: input.Author, after: input.AfterTimestamp, order: 'asc', pageSize: input.Limit, includeTotal: 'true' },
      pascalPath([], { after: 'AfterTimestamp' }),
    );
    const page = await listSessionEvents(db, pageTokens, limits.listPageBytes, key, query, input.Offset);
    // A page the byte budget ended early: a client that steps Offset by Limit would skip the events
    // it left out, so the call is refused instead, as DescribeSessions does.
    if (page.events.length < query.pageSize && page.nextPageToken !== undefined) {
      throw new Tc3Error(
        'InvalidParameterValue',
        `Limit: the ${query.pageSize} events from Offset ${input.Offset} carry more than ${limits.listPageBytes} bytes (MAX_LIST_PAGE_BYTES); the first ${page.events.length} fit, ask a Limit of at most that`,
      );
    }
    return { Events: page.events.map(toEventInfo), TotalCount: page.totalCount ?? 0 };
  },
});
