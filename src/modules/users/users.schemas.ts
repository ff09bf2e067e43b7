// Schemas of the business users of a space.
import { z } from 'zod';
import { Identifier, IncludeTotal, JsonObject, PageToken, Timestamp, pageSize } from '../../http/schemas.js';

export const SpaceUser = z
  .object({
    userId: Identifier,
    sessionCount: z.number().int().describe('Sessions of the user in the space (expired sessions count until the sweeper removes them).'),
    lastActivityTime: Timestamp.nullable().describe('Latest updateTime of the user\'s unexpired sessions; null when there is none.'),
  })
  .meta({ id: 'SpaceUser' });

export type SpaceUserView = z.infer<typeof SpaceUser>;


export const ListSpaceUsersQuery = z.strictObject({
  pageSize: pageSize(20, 100),
  pageToken: PageToken.optional(),
  includeTotal: IncludeTotal,
});
export type ListSpaceUsersInput = z.infer<typeof ListSpaceUsersQuery>;


export const UserState = z
  .object({
    userId: Identifier,
    state: JsonObject.describe('The user-scoped state: only `user:*` keys, shared by all sessions of the user in the space.'),
  })
  .meta({ id: 'UserState' });
export type UserStateView = z.infer<typeof UserState>;

export const ListSpaceUsersResponse = z.object({
  users: z.array(SpaceUser),
  nextPageToken: z.string().optional().describe('Present while more users follow.'),
  totalCount: z.number().int().optional().describe('Only with includeTotal=true.'),
});
