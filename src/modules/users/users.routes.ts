// /v1/spaces/{spaceId}/users: the business users of a space.
import { SpacePath, UserPath, errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { ListSpaceUsersQuery, ListSpaceUsersResponse, UserState } from './users.schemas.js';
import { describeUserState, listSpaceUsersPage } from './users.service.js';

export async function usersRoutes(app: ZodApp, { pageTokens }: AppDeps): Promise<void> {
  app.get(
    '/spaces/:spaceId/users',
    {
      config: { action: 'session:DescribeSessions' },
      schema: {
        tags: ['spaces'],
        summary: 'List the business users of a space',
        operationId: 'listSpaceUsers',
        description:
          'Users that have a session or user-scoped state in the space, ordered by userId, with their session count and last activity. ' +
          'Users are the application\'s own ids, not accounts or permissions.',
        params: SpacePath,
        querystring: ListSpaceUsersQuery,
        response: {
          200: ListSpaceUsersResponse,
          ...errorResponses('InvalidParameter.PageToken', 'UnauthorizedOperation', 'ResourceNotFound.SessionSpace'),
        },
      },
    },
    async (request) => listSpaceUsersPage(request.db, pageTokens, request.principal.accountId, request.params.spaceId, request.query),
  );

  app.get(
    '/spaces/:spaceId/users/:userId/state',
    {
      config: { action: 'session:DescribeSessions' },
      schema: {
        tags: ['spaces'],
        summary: "Describe a user's state",
        operationId: 'getUserState',
        description:
          'The user-scoped state of the user in the space: the `user:*` keys written by the stateDelta of any of its sessions ' +
          '(or by their initial state), shared by all of them. A user that does not exist in the space (no session and no user state) ' +
          'answers 200 with an empty state, not 404: the state of a user nobody wrote to is empty.',
        params: UserPath,
        response: {
          200: UserState,
          ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SessionSpace'),
        },
      },
    },
    async (request) => describeUserState(request.db, request.principal.accountId, request.params.spaceId, request.params.userId),
  );
}
