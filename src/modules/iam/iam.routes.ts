// /v1/iam: sub-accounts, their policies, and the credentials of the root and of sub-accounts.
// Every action is evaluated on the account resource: the root may always, a sub-account only
// with a statement allowing the action on `*`.
import { z } from 'zod';
import { errorResponses } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import {
  CreateSubAccountBody,
  Credential,
  CredentialPath,
  IssuedCredential,
  ListCredentialsResponse,
  ListSubAccountsQuery,
  ListSubAccountsResponse,
  ModifyCredentialBody,
  SubAccount,
  SubAccountPath,
  SubAccountPolicy,
} from './iam.schemas.js';
import {
  createCredential,
  createSubAccount,
  deleteCredential,
  deleteSubAccount,
  describeSubAccount,
  getPolicy,
  listCredentialsOf,
  listSubAccountsPage,
  modifyCredential,
  putPolicy,
} from './iam.service.js';
import { PolicyDocument } from '../../lib/policy.js';

const tags = ['iam'];
const BODY_ERRORS = ['LimitExceeded.RequestSize', 'UnsupportedMediaType'] as const;
const deleted = z.null().describe('Deleted.');

export async function iamRoutes(app: ZodApp, { credentialMasterKey, credentialChangesApplied, pageTokens }: AppDeps): Promise<void> {
  // A change that can stop a credential working answers once this instance's credential cache has
  // dropped what it changed: the next request here sees it, whatever the notification's latency.
  const onceApplied = async <T>(change: Promise<T>): Promise<T> => {
    const result = await change;
    await credentialChangesApplied();
    return result;
  };

  app.post(
    '/iam/subaccounts',
    {
      config: { action: 'iam:CreateSubAccount' },
      schema: {
        tags,
        summary: 'Create a sub-account',
        operationId: 'createSubAccount',
        description: 'A new sub-account may do nothing until a policy is put and a credential is created for it.',
        body: CreateSubAccountBody,
        response: { 201: SubAccount, ...errorResponses('UnauthorizedOperation', ...BODY_ERRORS) },
      },
    },
    async (request, reply) => reply.code(201).send(await createSubAccount(request.db, request.principal.accountId, request.body.name)),
  );

  app.get(
    '/iam/subaccounts',
    {
      config: { action: 'iam:DescribeSubAccounts' },
      schema: {
        tags,
        summary: 'List sub-accounts',
        operationId: 'listSubAccounts',
        description: 'Oldest first, with keyset paging.',
        querystring: ListSubAccountsQuery,
        response: { 200: ListSubAccountsResponse, ...errorResponses('InvalidParameter.PageToken', 'UnauthorizedOperation') },
      },
    },
    async (request) => listSubAccountsPage(request.db, pageTokens, request.principal.accountId, request.query),
  );

  app.get(
    '/iam/subaccounts/:subAccountId',
    {
      config: { action: 'iam:DescribeSubAccounts' },
      schema: {
        tags,
        summary: 'Describe a sub-account',
        operationId: 'describeSubAccount',
        params: SubAccountPath,
        response: { 200: SubAccount, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SubAccount') },
      },
    },
    async (request) => describeSubAccount(request.db, request.principal.accountId, request.params.subAccountId),
  );

  app.delete(
    '/iam/subaccounts/:subAccountId',
    {
      config: { action: 'iam:DeleteSubAccount' },
      schema: {
        tags,
        summary: 'Delete a sub-account',
        operationId: 'deleteSubAccount',
        description: 'Its credentials stop working at once and its policy is deleted with it.',
        params: SubAccountPath,
        response: { 204: deleted, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SubAccount') },
      },
    },
    async (request, reply) => {
      await onceApplied(deleteSubAccount(request.db, request.principal.accountId, request.params.subAccountId));
      return reply.code(204).send(null);
    },
  );

  app.put(
    '/iam/subaccounts/:subAccountId/policy',
    {
      config: { action: 'iam:PutPolicy' },
      schema: {
        tags,
        summary: "Replace a sub-account's policy",
        operationId: 'putSubAccountPolicy',
        description:
          'Default deny; any matching deny wins; else any matching allow allows. Takes effect with the next request. ' +
          'Unknown action names, malformed resources and an empty statement list are 400, naming the field (e.g. statements[0].actions[1]).',
        params: SubAccountPath,
        body: PolicyDocument,
        response: { 200: SubAccountPolicy, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SubAccount', ...BODY_ERRORS) },
      },
    },
    async (request) => onceApplied(putPolicy(request.db, request.principal.accountId, request.params.subAccountId, request.body.statements)),
  );

  app.get(
    '/iam/subaccounts/:subAccountId/policy',
    {
      config: { action: 'iam:GetPolicy' },
      schema: {
        tags,
        summary: "Get a sub-account's policy",
        operationId: 'getSubAccountPolicy',
        description: 'A sub-account whose policy was never put answers `{ "statements": [] }` (no updateTime): it may do nothing.',
        params: SubAccountPath,
        response: { 200: SubAccountPolicy, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SubAccount') },
      },
    },
    async (request) => getPolicy(request.db, request.principal.accountId, request.params.subAccountId),
  );

  app.post(
    '/iam/subaccounts/:subAccountId/credentials',
    {
      config: { action: 'iam:CreateCredential' },
      schema: {
        tags,
        summary: 'Create a credential for a sub-account',
        operationId: 'createSubAccountCredential',
        description: 'The secretKey and token are shown in this response only; store them now.',
        params: SubAccountPath,
        response: { 201: IssuedCredential, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SubAccount') },
      },
    },
    async (request, reply) =>
      reply.code(201).send(await createCredential(request.db, request.principal.accountId, request.params.subAccountId, credentialMasterKey)),
  );

  app.get(
    '/iam/subaccounts/:subAccountId/credentials',
    {
      config: { action: 'iam:DescribeCredentials' },
      schema: {
        tags,
        summary: "List a sub-account's credentials",
        operationId: 'listSubAccountCredentials',
        description: 'Oldest first. Never any secret.',
        params: SubAccountPath,
        response: { 200: ListCredentialsResponse, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.SubAccount') },
      },
    },
    async (request) => listCredentialsOf(request.db, request.principal.accountId, request.params.subAccountId),
  );

  app.post(
    '/iam/credentials',
    {
      config: { action: 'iam:CreateCredential' },
      schema: {
        tags,
        summary: 'Create a root credential',
        operationId: 'createRootCredential',
        description: 'The secretKey and token are shown in this response only; store them now.',
        response: { 201: IssuedCredential, ...errorResponses('UnauthorizedOperation') },
      },
    },
    async (request, reply) => reply.code(201).send(await createCredential(request.db, request.principal.accountId, undefined, credentialMasterKey)),
  );

  app.get(
    '/iam/credentials',
    {
      config: { action: 'iam:DescribeCredentials' },
      schema: {
        tags,
        summary: "List the root's credentials",
        operationId: 'listRootCredentials',
        description: 'Oldest first. Never any secret.',
        response: { 200: ListCredentialsResponse, ...errorResponses('UnauthorizedOperation') },
      },
    },
    async (request) => listCredentialsOf(request.db, request.principal.accountId, undefined),
  );

  app.patch(
    '/iam/credentials/:secretId',
    {
      config: { action: 'iam:ModifyCredential' },
      schema: {
        tags,
        summary: 'Enable or disable a credential',
        operationId: 'modifyCredential',
        description:
          "Any credential of the account, the root's or a sub-account's. A disabled credential answers 401 at once. " +
          "Disabling the root's last enabled credential is refused (409) so that the account cannot lock itself out.",
        params: CredentialPath,
        body: ModifyCredentialBody,
        response: {
          200: Credential,
          ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.Credential', 'OperationDenied.LastRootCredential', ...BODY_ERRORS),
        },
      },
    },
    async (request) => onceApplied(modifyCredential(request.db, request.principal.accountId, request.params.secretId, request.body.status)),
  );

  app.delete(
    '/iam/credentials/:secretId',
    {
      config: { action: 'iam:DeleteCredential' },
      schema: {
        tags,
        summary: 'Delete a credential',
        operationId: 'deleteCredential',
        description: "Any credential of the account. Deleting the root's last enabled credential is refused (409).",
        params: CredentialPath,
        response: { 204: deleted, ...errorResponses('UnauthorizedOperation', 'ResourceNotFound.Credential', 'OperationDenied.LastRootCredential') },
      },
    },
    async (request, reply) => {
      await onceApplied(deleteCredential(request.db, request.principal.accountId, request.params.secretId));
      return reply.code(204).send(null);
    },
  );
}
