// Issue 10: ids that clients and proxies normalize away. A raw `POST …/users/../sessions` used to
// create a user named `..`. app.inject resolves dot segments (it builds a WHATWG URL) before the
// router sees them, so the path cases go over a real socket with node:http, which sends the path
// as given; the body cases go through app.inject.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let port: number;
let sessionId: string;
const USER = 'dots-user';

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
  sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
});
afterAll(async () => t?.close());

/** A request with the path exactly as written: node:http does not resolve dot segments. */
function rawRequest(method: string, path: string, body?: unknown): Promise<{ status: number; json: { error: { code: string; message: string; details?: unknown } } }> {
  return new Promise((resolve, reject) => {
    const payload = body === undefined ? undefined : JSON.stringify(body);
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path,
        headers: { authorization: `Bearer ${t.account.rootCredential.token}`, ...(payload ? { 'content-type': 'application/json' } : {}) },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, json: JSON.parse(text) }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const DOT_SEGMENTS = ['.', '..', '%2E', '%2e%2E', '.%2E'];
const RULE = 'must not be "." or "..": a URL path segment of only dots is removed by clients and proxies (RFC 3986 §5.2.4)';
const space = () => `/v1/spaces/${t.account.defaultSpaceId}`;

describe('dot-segment ids', () => {
  it.each(DOT_SEGMENTS)('refuses userId %s in the path with 400 InvalidParameter, writing nothing', async (segment) => {
    const before = await tableFingerprints(t.db);
    for (const [method, path, body] of [
      ['POST', `${space()}/users/${segment}/sessions`, {}],
      ['GET', `${space()}/users/${segment}/state`, undefined],
      ['GET', `${space()}/users/${segment}/sessions`, undefined],
    ] as const) {
      const res = await rawRequest(method, path, body);
      expect({ path, status: res.status, code: res.json.error.code }).toEqual({ path, status: 400, code: 'InvalidParameter' });
      expect(res.json.error.details).toEqual({ issues: [{ field: 'userId', message: RULE }] });
    }
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it.each(DOT_SEGMENTS)('refuses sessionId %s in the path with 400 InvalidParameter, writing nothing', async (segment) => {
    const before = await tableFingerprints(t.db);
    for (const [method, path, body] of [
      ['POST', `${space()}/users/${USER}/sessions/${segment}/events`, { author: 'user' }],
      ['PATCH', `${space()}/users/${USER}/sessions/${segment}`, { title: 'x' }],
      ['DELETE', `${space()}/users/${USER}/sessions/${segment}`, undefined],
    ] as const) {
      const res = await rawRequest(method, path, body);
      expect({ path, status: res.status, code: res.json.error.code }).toEqual({ path, status: 400, code: 'InvalidParameter' });
      expect(res.json.error.details).toEqual({ issues: [{ field: 'sessionId', message: RULE }] });
    }
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it.each(DOT_SEGMENTS)('refuses eventId %s in the path with 400 InvalidParameter', async (segment) => {
    const res = await rawRequest('GET', `${space()}/users/${USER}/sessions/${sessionId}/events/${segment}`);
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('InvalidParameter');
    expect(res.json.error.details).toEqual({ issues: [{ field: 'eventId', message: RULE }] });
  });

  it.each(DOT_SEGMENTS)('refuses spaceId %s in the path with 400 InvalidParameter, writing nothing', async (segment) => {
    const before = await tableFingerprints(t.db);
    for (const [method, path] of [
      ['POST', `/v1/spaces/${segment}/users/${USER}/sessions`],
      ['PATCH', `/v1/spaces/${segment}`],
    ] as const) {
      const res = await rawRequest(method, path, {});
      expect({ path, status: res.status, code: res.json.error.code }).toEqual({ path, status: 400, code: 'InvalidParameter' });
      expect(res.json.error.details).toEqual({ issues: [expect.objectContaining({ field: 'spaceId' })] });
    }
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it.each(['.', '..'])('refuses %s as a sessionId or eventId in a body (app.inject), writing nothing', async (id) => {
    const before = await tableFingerprints(t.db);
    const created = await t.request({ method: 'POST', url: `${space()}/users/${USER}/sessions`, payload: { sessionId: id } });
    expect(created.statusCode).toBe(400);
    expect(created.json().error.code).toBe('InvalidParameter');
    expect(created.json().error.details).toEqual({ issues: [{ field: 'sessionId', message: RULE }] });
    const appended = await t.request({ method: 'POST', url: `${space()}/users/${USER}/sessions/${sessionId}/events`, payload: { eventId: id, author: 'user' } });
    expect(appended.statusCode).toBe(400);
    expect(appended.json().error.code).toBe('InvalidParameter');
    expect(appended.json().error.details).toEqual({ issues: [{ field: 'eventId', message: RULE }] });
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('still takes ids with dots that are not dot segments', async () => {
    const res = await rawRequest('POST', `${space()}/users/.../sessions`, { sessionId: 'a.b' });
    expect(res.status).toBe(201);
  });
});
