// /v1/spaces: create, list, describe, modify and delete session spaces.
import { z } from 'zod';
import { SpacePath, errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { SESSION_ACTIONS, allowedSpaceActions } from '../../lib/policy.js';
import { CreateSpaceBody, ListSpacesQuery, ListSpacesResponse, ModifySpaceBody, SessionSpace } from './spaces.schemas.js';
import { createSpace, deleteSpace, describeSpace, listSpacesPage, modifySpace } from './spaces.service.js';

const SpacePermissions = z
  .object({
    spaceId: z.string(),
    principalKind: z.enum(['root', 'sub']).describe('root: the account itself, allowed everything; sub: a sub-account, allowed what its policy says.'),
    actions: z.array(z.enum(SESSION_ACTIONS)).describe('The session actions the caller may perform on this space, as its policy evaluates them now.'),
  })
  .meta({ id: 'SpacePermissions' });

export async function spacesRoutes(app: ZodApp, { pageTokens }: AppDeps): Promise<void> {
  app.get(
    '/spaces/:spaceId/permissions',
    {
      config: { action: 'session:DescribeSessionSpaces' },
      schema: {
        tags: ['spaces'],
        summary: 'What the caller may do in a space',
        operationId: 'getSpacePermissions',
        description:
          'The session actions the calling credential\'s principal may perform on the space, evaluated from its policy at this moment. ' +
          'A user interface shows only what it offers (the console hides Delete without session:DeleteSession); the service still ' +
          'checks every request on its own.',
        params: SpacePath,
        response: { 200: SpacePermissions, ...errorResponses('ResourceNotFound.SessionSpace') },
      },
    },
    async (request) => {
      await describeSpace(request.db, request.principal.accountId, request.params.spaceId); // 404 for another account's space
      return {
        spaceId: request.params.spaceId,
        principalKind: request.principal.kind,
        actions: allowedSpaceActions(request.principal, request.params.spaceId),
      };
    },
  );

  app.post(
    '/spaces',
    {
      config: { action: 'session:CreateSessionSpace' },
      schema: {
        tags: ['spaces'],
        summary: 'Create a session space',
        operationId: 'createSessionSpace',
        description: 'Answers 201 with the new space; with `onNameExists: reuse`, 200 with the existing space of that name instead.',
        body: CreateSpaceBody,
        response: {
          200: SessionSpace.describe('onNameExists: reuse found a space of this name: the oldest one, unchanged.'),
          201: SessionSpace.describe('The new space.'),
          ...errorResponses('UnauthorizedOperation', 'LimitExceeded.RequestSize', 'UnsupportedMediaType'),
        },
      },
    },
    async (request, reply) => {
      const { space, created } = await createSpace(request.db, request.principal, request.body);
      return reply.code(created ? 201 : 200).send(space);
    },
  );

  app.get(
    '/spaces',
    {
      config: { action: 'session:DescribeSessionSpaces' },
      schema: {
        tags: ['spaces'],
        summary: 'List session spaces',
        operationId: 'listSessionSpaces',
        description: 'Oldest first (by createTime, then spaceId), with keyset paging. A sub-account sees only the spaces its policy lets it describe.',
        querystring: ListSpacesQuery,
        response: { 200: ListSpacesResponse, ...errorResponses('InvalidParameter.PageToken', 'UnauthorizedOperation') },
      },
    },
    async (request) => listSpacesPage(request.db, pageTokens, request.principal, request.query),
  );

  app.get(
    '/spaces/:spaceId',
    {
      config: { action: 'session:DescribeSessionSpaces' },
      schema: {
        tags: ['spaces'],
        summary: 'Describe a session space',
        operationId: 'describeSessionSpace',
        params: SpacePath,
        response: { 200: SessionSpace, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SessionSpace') },
      },
    },
    async (request) => describeSpace(request.db, request.principal.accountId, request.params.spaceId),
  );

  app.patch(
    '/spaces/:spaceId',
    {
      config: { action: 'session:ModifySessionSpace' },
      schema: {
        tags: ['spaces'],
        summary: 'Rename a session space or change its description or default TTL',
        operationId: 'modifySessionSpace',
        params: SpacePath,
        body: ModifySpaceBody,
        response: {
          200: SessionSpace,
          ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SessionSpace', 'LimitExceeded.RequestSize', 'UnsupportedMediaType'),
        },
      },
    },
    async (request) => modifySpace(request.db, request.principal.accountId, request.params.spaceId, request.body),
  );

  app.delete(
    '/spaces/:spaceId',
    {
      config: { action: 'session:DeleteSessionSpace' },
      schema: {
        tags: ['spaces'],
        summary: 'Delete an empty session space',
        operationId: 'deleteSessionSpace',
        description: 'Refused (409) while the space holds sessions or user or space state, and always for the default space.',
        params: SpacePath,
        response: {
          204: z.null().describe('Deleted.'),
          ...errorResponses(
            'UnauthorizedOperation',
            'ResourceNotFound.SessionSpace',
            'ResourceInUse.SessionSpaceNotEmpty',
            'OperationDenied.DefaultSessionSpaceProtected',
          ),
        },
      },
    },
    async (request, reply) => {
      await deleteSpace(request.db, request.principal.accountId, request.params.spaceId);
      return reply.code(204).send(null);
    },
  );
}
