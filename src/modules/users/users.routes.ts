// /v1/spaces/{spaceId}/users: the business users of a space.
import { errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { ListSpaceUsersQuery, ListSpaceUsersResponse, SpaceUsersPath } from './users.schemas.js';
import { listSpaceUsersPage } from './users.service.js';

export async function usersRoutes(app: ZodApp, { db }: AppDeps): Promise<void> {
  app.get(
    '/spaces/:spaceId/users',
    {
      config: { action: 'session:DescribeSessions' },
      schema: {
        tags: ['spaces'],
        summary: 'List the business users of a space',
        description:
          'Users that have a session or user-scoped state in the space, ordered by userId, with their session count and last activity. ' +
          'Users are the application\'s own ids, not accounts or permissions.',
        params: SpaceUsersPath,
        querystring: ListSpaceUsersQuery,
        response: {
          200: ListSpaceUsersResponse,
          ...errorResponses('InvalidParameter.PageToken', 'UnauthorizedOperation', 'ResourceNotFound.SessionSpace'),
        },
      },
    },
    async (request) => listSpaceUsersPage(db, request.principal.accountId, request.params.spaceId, request.query),
  );
}
