// The committed OpenAPI document (openapi:check keeps it equal to the code) describes every route,
// its authentication and its errors.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { refResolver } from '../support/arbitraries.js';

interface Operation {
  summary?: string;
  operationId?: string;
  tags?: string[];
  security?: unknown[];
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }>; headers?: Record<string, { $ref?: string }> }>;
}
const document = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8')) as {
  openapi: string;
  security: unknown[];
  paths: Record<string, Record<string, Operation>>;
  tags: { name: string }[];
  servers?: { url: string }[];
  components: { schemas: Record<string, unknown> };
};
const operations = Object.entries(document.paths).flatMap(([path, methods]) =>
  Object.entries(methods).map(([method, operation]) => ({ name: `${method.toUpperCase()} ${path}`, path, operation })),
);
const v1 = operations.filter((op) => op.path.startsWith('/v1/'));

describe('the OpenAPI document', () => {
  it('is OpenAPI 3.1 with bearer authentication by default', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.security).toEqual([{ bearer: [] }]);
  });

  it('lists every route of docs/design.md §3', () => {
    expect(v1.map((op) => op.name).sort()).toEqual(
      [
        'POST /v1/spaces',
        'GET /v1/spaces',
        'GET /v1/spaces/{spaceId}',
        'PATCH /v1/spaces/{spaceId}',
        'DELETE /v1/spaces/{spaceId}',
        'GET /v1/spaces/{spaceId}/users',
        'POST /v1/spaces/{spaceId}/users/{userId}/sessions',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions',
        'GET /v1/spaces/{spaceId}/sessions',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}',
        'PATCH /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}',
        'DELETE /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}',
        'POST /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/{eventId}',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/stream',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/state-at/{seq}',
        'GET /v1/spaces/{spaceId}/permissions',
        'GET /v1/spaces/{spaceId}/users/{userId}/state',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/context',
        'PUT /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/context',
        'GET /v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/export',
        'POST /v1/spaces/{spaceId}/sessions/import',
        'POST /v1/iam/subaccounts',
        'GET /v1/iam/subaccounts',
        'GET /v1/iam/subaccounts/{subAccountId}',
        'DELETE /v1/iam/subaccounts/{subAccountId}',
        'PUT /v1/iam/subaccounts/{subAccountId}/policy',
        'GET /v1/iam/subaccounts/{subAccountId}/policy',
        'POST /v1/iam/subaccounts/{subAccountId}/credentials',
        'GET /v1/iam/subaccounts/{subAccountId}/credentials',
        'POST /v1/iam/credentials',
        'GET /v1/iam/credentials',
        'PATCH /v1/iam/credentials/{secretId}',
        'DELETE /v1/iam/credentials/{secretId}',
      ].sort(),
    );
  });

  it.each(v1.map((op) => [op.name, op.operation] as const))('%s has a summary, a success response and its errors in the envelope', (_name, operation) => {
    expect(operation.summary).toEqual(expect.any(String));
    const statuses = Object.keys(operation.responses);
    expect(statuses.some((status) => status.startsWith('2'))).toBe(true);
    for (const status of ['400', '401', '403', '429', '500', '503']) expect(statuses).toContain(status);
    for (const status of statuses.filter((s) => Number(s) >= 400)) {
      expect(operation.responses[status]!.content!['application/json']!.schema!.$ref).toBe('#/components/schemas/Error');
    }
  });

  it('names every operation with a unique camelCase operationId and a declared tag', () => {
    const ids = operations.map((op) => op.operation.operationId);
    for (const id of ids) expect(id).toMatch(/^[a-z][a-zA-Z]+$/);
    expect(new Set(ids).size).toBe(ids.length);
    const declared = document.tags.map((tag) => tag.name);
    for (const op of operations) expect(op.operation.tags?.length ? op.operation.tags.every((tag) => declared.includes(tag)) : false, op.name).toBe(true);
    expect(document.servers?.length).toBeGreaterThan(0);
  });

  it('has a target for every $ref, and one named JSON value instead of anonymous shared definitions', () => {
    const resolve = refResolver(document);
    const refs = [...JSON.stringify(document).matchAll(/"\$ref":"([^"]+)"/g)].map((match) => match[1]!);
    expect(refs.length).toBeGreaterThan(0);
    expect([...new Set(refs)].filter((ref) => !ref.startsWith('#/') || resolve(ref) === undefined)).toEqual([]);
    expect(Object.keys(document.components.schemas)).toEqual(expect.arrayContaining(['JsonValue', 'JsonObject']));
    expect(Object.keys(document.components.schemas)).not.toContain('__shared');
  });

  it('declares the response headers: X-Request-Id always, ETag on session writes and reads, Retry-After and the rate limit', () => {
    const headersOf = (id: string, status: string) => Object.keys(operations.find((op) => op.operation.operationId === id)!.operation.responses[status]!.headers ?? {});
    for (const op of operations) for (const response of Object.values(op.operation.responses)) expect(Object.keys(response.headers ?? {})).toContain('X-Request-Id');
    for (const [id, status] of [['appendEvents', '201'], ['createSession', '201'], ['describeSession', '200'], ['modifySession', '200'], ['getContext', '200'], ['putContext', '200']] as const) {
      expect(headersOf(id, status), id).toContain('ETag');
    }
    expect(headersOf('listSessionSpaces', '200')).not.toContain('ETag');
    expect(headersOf('listSessionSpaces', '429')).toEqual(expect.arrayContaining(['Retry-After', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset']));
    expect(headersOf('getReadiness', '503')).toContain('Retry-After');
  });

  it('leaves health checks unauthenticated', () => {
    expect(document.paths['/healthz']!.get!.security).toEqual([]);
    expect(document.paths['/readyz']!.get!.security).toEqual([]);
    expect(document.paths['/metrics']!.get!.security).toEqual([]);
    expect(Object.keys(document.paths['/metrics']!.get!.responses['200']!.content!)).toEqual(['text/plain; version=0.0.4']);
  });
});
