// Each operation of openapi/openapi.json: its HTTP method and path template, keyed by operationId.
// test/unit/client-operations.test.ts checks this table against the document, both ways.
import type { operations } from './generated/openapi.js';

export type OperationId = keyof operations;
export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export const OPERATIONS = {
  getLiveness: { method: 'GET', path: '/healthz' },
  getReadiness: { method: 'GET', path: '/readyz' },
  getMetrics: { method: 'GET', path: '/metrics' },
  createSessionSpace: { method: 'POST', path: '/v1/spaces' },
  listSessionSpaces: { method: 'GET', path: '/v1/spaces' },
  describeSessionSpace: { method: 'GET', path: '/v1/spaces/{spaceId}' },
  modifySessionSpace: { method: 'PATCH', path: '/v1/spaces/{spaceId}' },
  deleteSessionSpace: { method: 'DELETE', path: '/v1/spaces/{spaceId}' },
  getSpacePermissions: { method: 'GET', path: '/v1/spaces/{spaceId}/permissions' },
  listSpaceUsers: { method: 'GET', path: '/v1/spaces/{spaceId}/users' },
  getUserState: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/state' },
  createSession: { method: 'POST', path: '/v1/spaces/{spaceId}/users/{userId}/sessions' },
  listSessions: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions' },
  listSpaceSessions: { method: 'GET', path: '/v1/spaces/{spaceId}/sessions' },
  describeSession: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}' },
  modifySession: { method: 'PATCH', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}' },
  deleteSession: { method: 'DELETE', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}' },
  appendEvents: { method: 'POST', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events' },
  listEvents: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events' },
  describeEvent: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/{eventId}' },
  streamEvents: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/stream' },
  getStateAtEvent: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/state-at/{seq}' },
  exportSession: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/export' },
  importSession: { method: 'POST', path: '/v1/spaces/{spaceId}/sessions/import' },
  getContext: { method: 'GET', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/context' },
  putContext: { method: 'PUT', path: '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/context' },
  createSubAccount: { method: 'POST', path: '/v1/iam/subaccounts' },
  listSubAccounts: { method: 'GET', path: '/v1/iam/subaccounts' },
  describeSubAccount: { method: 'GET', path: '/v1/iam/subaccounts/{subAccountId}' },
  deleteSubAccount: { method: 'DELETE', path: '/v1/iam/subaccounts/{subAccountId}' },
  putSubAccountPolicy: { method: 'PUT', path: '/v1/iam/subaccounts/{subAccountId}/policy' },
  getSubAccountPolicy: { method: 'GET', path: '/v1/iam/subaccounts/{subAccountId}/policy' },
  createSubAccountCredential: { method: 'POST', path: '/v1/iam/subaccounts/{subAccountId}/credentials' },
  listSubAccountCredentials: { method: 'GET', path: '/v1/iam/subaccounts/{subAccountId}/credentials' },
  createRootCredential: { method: 'POST', path: '/v1/iam/credentials' },
  listRootCredentials: { method: 'GET', path: '/v1/iam/credentials' },
  modifyCredential: { method: 'PATCH', path: '/v1/iam/credentials/{secretId}' },
  deleteCredential: { method: 'DELETE', path: '/v1/iam/credentials/{secretId}' },
} as const satisfies Record<OperationId, { method: HttpMethod; path: string }>;
