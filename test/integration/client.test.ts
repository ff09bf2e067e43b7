// The TypeScript client (clients/typescript) against the real server over a socket, on the backend
// the integration project runs on: a whole lifecycle, the typed errors, ids no URL path can carry
// refused before sending, and retries that store nothing twice — across a 503, a refused connection
// and an answer lost after the server acted (test/integration/client-lost-answers.test.ts has the
// writes a resend could misreport).
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AgentSessionClient, AgentSessionError, OPERATIONS } from '../../clients/typescript/src/index.js';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let port: number;
const servers: (http.Server | net.Server)[] = [];
const sockets = new Set<net.Socket>(); // the forwarders' connections, cut at the end (fetch keeps them alive)
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

beforeAll(async () => {
  t = await createTestApp();
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  for (const server of servers) {
    if ('closeAllConnections' in server) server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  await t?.close();
});

function clientAt(baseUrl: string, options: Partial<ConstructorParameters<typeof AgentSessionClient>[0]> = {}) {
  return new AgentSessionClient({ baseUrl, credential: t.account.rootCredential.token, ...options });
}
const listening = <S extends http.Server | net.Server>(server: S, at = 0) =>
  new Promise<number>((resolve) => {
    servers.push(server);
    server.listen(at, '127.0.0.1', () => resolve((server.address() as AddressInfo).port));
  });
/** A TCP forwarder to the app; with dropFirstAnswer, the first connection's answer is cut off once it starts (the server has acted by then). */
function forwarder(options: { dropFirstAnswer?: boolean } = {}) {
  let connections = 0;
  const server = net.createServer((socket) => {
    const first = ++connections === 1;
    const upstream = net.connect(port, '127.0.0.1');
    sockets.add(socket).add(upstream);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
    socket.pipe(upstream);
    if (first && options.dropFirstAnswer) upstream.once('data', () => (socket.destroy(), upstream.destroy()));
    else upstream.pipe(socket);
  });
  return { server, connections: () => connections };
}
async function freePort(): Promise<number> {
  const probe = net.createServer();
  const free = await new Promise<number>((resolve) => probe.listen(0, '127.0.0.1', () => resolve((probe.address() as AddressInfo).port)));
  await new Promise((resolve) => probe.close(resolve));
  return free;
}
async function storedEvents(sessionId: string) {
  return t.db.selectFrom('events').select(['event_id', 'seq']).where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).execute();
}

describe('AgentSessionClient against the server', () => {
  it('runs a session lifecycle: space, session, appends, describe, paged lists, context, modify with If-Match, delete', async () => {
    const client = clientAt(`http://127.0.0.1:${port}`);
    const space = await client.createSessionSpace({ name: `client-${Date.now()}` });
    const where = { spaceId: space.spaceId, userId: 'client-user' };

    const created = await client.createSession(where, { title: 'first', state: { turns: 0 } });
    expect(created.etag).toBe(`"${created.revision}"`);
    const session = { ...where, sessionId: created.sessionId };

    const single = await client.appendEvents(session, { author: 'user', content: { role: 'user', parts: [{ text: 'hi' }] }, actions: { stateDelta: { turns: 1 } } });
    expect(single.events).toHaveLength(1);
    expect(single.events[0]!.eventId).toMatch(UUID);
    const batch = await client.appendEvents(session, {
      events: [
        { author: 'model', content: { role: 'model', parts: [{ text: 'hello' }] } },
        { author: 'user', eventId: 'caller-id', actions: { stateDelta: { turns: 2, topic: 'sdk' } } },
      ],
    });
    expect(batch.events.map((event) => event.eventId)).toEqual([expect.stringMatching(UUID), 'caller-id']);
    expect(batch.etag).toBe(`"${batch.session.revision}"`);

    const described = await client.describeSession(session);
    expect(described).toMatchObject({ sessionId: session.sessionId, title: 'first', state: { turns: 2, topic: 'sdk' }, eventCount: 3 });
    expect(described.etag).toBe(`"${described.revision}"`);

    const events = [];
    for await (const event of client.iterateEvents({ ...session, pageSize: 2 })) events.push(event.eventId);
    expect(events).toEqual([single.events[0]!.eventId, ...batch.events.map((event) => event.eventId)]);

    for (let i = 0; i < 4; i += 1) await client.createSession(where, { title: `more-${i}` });
    const firstPage = await client.listSessions({ ...where, pageSize: 2 });
    expect(firstPage.sessions).toHaveLength(2);
    expect(firstPage.nextPageToken).toEqual(expect.any(String));
    const titles = [];
    for await (const listed of client.iterateSessions({ ...where, pageSize: 2, orderBy: 'createTime', order: 'asc' })) titles.push(listed.title);
    expect(titles).toEqual(['first', 'more-0', 'more-1', 'more-2', 'more-3']);
    const spaces = [];
    for await (const listed of client.iterateSessionSpaces({ pageSize: 1 })) spaces.push(listed.spaceId);
    expect(spaces).toContain(space.spaceId);

    const context = await client.getContext({ ...session, maxEvents: 2 });
    expect(context.events.map((event) => event.eventId)).toEqual(batch.events.map((event) => event.eventId));
    expect(context.etag).toBe(described.etag);

    const modified = await client.modifySession(session, { title: 'renamed' }, { ifMatch: described.etag });
    expect(modified).toMatchObject({ title: 'renamed', revision: described.revision + 1 });
    expect(modified.etag).toBe(`"${described.revision + 1}"`);
    const stale = await client.modifySession(session, { title: 'lost' }, { ifMatch: described.etag, requestId: 'client-test-412' }).catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(AgentSessionError);
    expect(stale).toMatchObject({ code: 'FailedOperation.PreconditionFailed', status: 412, requestId: 'client-test-412' });
    expect((await client.describeSession(session)).title).toBe('renamed');

    await expect(client.deleteSession(session, { ifMatch: modified.etag })).resolves.toBeUndefined();
    await expect(client.describeSession(session)).rejects.toMatchObject({ code: 'ResourceNotFound.Session', status: 404 });
  });

  it('throws AgentSessionError with the exact code on 404 and 400', async () => {
    const client = clientAt(`http://127.0.0.1:${port}`);
    const missing = await client.describeSessionSpace({ spaceId: 'space-00000000-0000-4000-8000-000000000000' }).catch((error: unknown) => error);
    expect(missing).toBeInstanceOf(AgentSessionError);
    expect(missing).toMatchObject({ code: 'ResourceNotFound.SessionSpace', status: 404, requestId: expect.any(String) });
    const invalid = await client.createSessionSpace({ name: '' }).catch((error: unknown) => error);
    expect(invalid).toBeInstanceOf(AgentSessionError);
    expect(invalid).toMatchObject({ code: 'InvalidParameter', status: 400, details: { issues: [expect.objectContaining({ field: 'name' })] } });
    const unauthenticated = await new AgentSessionClient({ baseUrl: `http://127.0.0.1:${port}`, credential: 'nope.nope' })
      .listSessionSpaces()
      .catch((error: unknown) => error);
    expect(unauthenticated).toMatchObject({ code: 'AuthFailure', status: 401 });
  });

  it('retries a 503 after the Retry-After the server gave', async () => {
    let requests = 0;
    const front = http.createServer((request, response) => {
      if (++requests === 1) {
        response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '2', 'x-request-id': 'front-503' });
        response.end(JSON.stringify({ error: { code: 'ServiceUnavailable', message: 'try later', requestId: 'front-503' } }));
        return;
      }
      request.pipe(http.request({ host: '127.0.0.1', port, path: request.url, method: request.method, headers: request.headers }, (answer) => {
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      }));
    });
    const sleeps: number[] = [];
    const client = clientAt(`http://127.0.0.1:${await listening(front)}`, { sleep: async (ms) => void sleeps.push(ms) });
    const space = await client.describeSessionSpace({ spaceId: t.account.defaultSpaceId });
    expect(space.spaceId).toBe(t.account.defaultSpaceId);
    expect(requests).toBe(2);
    expect(sleeps).toEqual([2_000]);
  });

  it('retries an append across a refused connection and stores exactly one event, with the eventId it generated', async () => {
    const where = { spaceId: t.account.defaultSpaceId, userId: 'client-refused' };
    const { sessionId } = await clientAt(`http://127.0.0.1:${port}`).createSession(where);
    const closedPort = await freePort();
    const sleeps: number[] = [];
    const client = clientAt(`http://127.0.0.1:${closedPort}`, {
      // Nothing listens for the first attempt; the service comes up on that port while the client waits.
      sleep: async (ms) => {
        sleeps.push(ms);
        if (sleeps.length === 1) await listening(forwarder().server, closedPort);
      },
    });
    const answer = await client.appendEvents({ ...where, sessionId }, { author: 'user', content: { parts: [{ text: 'once' }] } });
    expect(sleeps).toHaveLength(1);
    const eventId = answer.events[0]!.eventId;
    expect(eventId).toMatch(UUID);
    expect(await storedEvents(sessionId)).toEqual([{ event_id: eventId, seq: 1 }]);
  });

  it('retries an append whose answer was lost after the server stored it, and stores it once (If-Match not held against the replay)', async () => {
    const where = { spaceId: t.account.defaultSpaceId, userId: 'client-lost-answer' };
    const { sessionId, etag } = await clientAt(`http://127.0.0.1:${port}`).createSession(where);
    const proxy = forwarder({ dropFirstAnswer: true });
    const sleeps: number[] = [];
    const client = clientAt(`http://127.0.0.1:${await listening(proxy.server)}`, { sleep: async (ms) => void sleeps.push(ms) });
    const answer = await client.appendEvents({ ...where, sessionId }, { events: [{ author: 'user', actions: { stateDelta: { n: 1 } } }, { author: 'model' }] }, { ifMatch: etag });
    expect(proxy.connections()).toBe(2);
    expect(sleeps).toHaveLength(1);
    const ids = answer.events.map((event) => event.eventId);
    expect(await storedEvents(sessionId)).toEqual([{ event_id: ids[0], seq: 1 }, { event_id: ids[1], seq: 2 }]);
    const described = await client.describeSession({ ...where, sessionId });
    expect(described).toMatchObject({ eventCount: 2, state: { n: 1 } });
  });
});

const DOT_RULE = 'must not be "." or "..": a URL path segment of only dots is removed by clients and proxies (RFC 3986 §5.2.4)';
const EMPTY_RULE = 'must not be empty: a URL path without the id names another resource';

/** A client whose fetch counts what it sends. */
function countingClient() {
  let sent = 0;
  const client = clientAt(`http://127.0.0.1:${port}`, { fetch: (input, init) => (sent++, globalThis.fetch(input, init)) });
  return { client, sent: () => sent };
}
/** Every operation with a path parameter, once per parameter, that parameter given `value` and the others `ids`. */
function everyPathIdCall(client: AgentSessionClient, ids: Record<string, string | number>, value: string) {
  const methods = client as unknown as Record<string, (params: object, body: object) => unknown>;
  return Object.entries(OPERATIONS).flatMap(([operation, { path }]) =>
    [...path.matchAll(/\{(\w+)\}/g)].map(([, field]) => ({
      operation,
      field: field!,
      // A body where the operation takes one, options where it does not; a stream is read once.
      call: async () => {
        const result = methods[operation]!.call(client, { ...ids, [field!]: value }, {});
        return typeof result === 'object' && result !== null && Symbol.asyncIterator in result ? (result as AsyncGenerator).next() : result;
      },
    })),
  );
}

describe('AgentSessionClient: ids a URL path cannot carry', () => {
  it.each([
    ['.', DOT_RULE],
    ['..', DOT_RULE],
    ['', EMPTY_RULE],
  ])('refuses %j in every path parameter of every operation with 400 InvalidParameter naming it, sending nothing', async (value, rule) => {
    const { client, sent } = countingClient();
    const { spaceId } = await client.createSessionSpace({ name: `dots-${Date.now()}` });
    const { sessionId } = await client.createSession({ spaceId, userId: 'dots-user' });
    const calls = everyPathIdCall(client, { spaceId, userId: 'dots-user', sessionId, eventId: 'dots-event', seq: 1, subAccountId: 'sub-none', secretId: 'secret-none' }, value);
    expect(calls.map((call) => call.field).sort()).toEqual(expect.arrayContaining(['eventId', 'secretId', 'seq', 'sessionId', 'spaceId', 'subAccountId', 'userId']));
    const before = await tableFingerprints(t.db);
    const sentBefore = sent();

    const outcomes = [];
    for (const { operation, field, call } of calls) {
      const error = await call().then(() => 'resolved', (caught: unknown) => caught);
      const { code, status, message, details, requestId } = error as AgentSessionError;
      outcomes.push({ operation, field, isAgentSessionError: error instanceof AgentSessionError, code, status, message, details, requestId });
    }
    expect(outcomes).toEqual(
      calls.map(({ operation, field }) => ({ operation, field, isAgentSessionError: true, code: 'InvalidParameter', status: 400, message: `${field}: ${rule}`, details: { issues: [{ field, message: rule }] }, requestId: undefined })),
    );
    expect(sent()).toBe(sentBefore);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
    await expect(client.describeSession({ spaceId, userId: 'dots-user', sessionId })).resolves.toMatchObject({ sessionId });
  });

  it('does not delete an empty space for deleteSession with userId and sessionId ".." (DELETE /v1/spaces/{spaceId}/ once)', async () => {
    const { client, sent } = countingClient();
    const { spaceId } = await client.createSessionSpace({ name: `dots-empty-${Date.now()}` });
    const before = await tableFingerprints(t.db);
    const error = await client.deleteSession({ spaceId, userId: '..', sessionId: '..' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentSessionError);
    expect(error).toMatchObject({ code: 'InvalidParameter', status: 400, message: `userId: ${DOT_RULE}` });
    expect(sent()).toBe(1); // the createSessionSpace
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
    await expect(client.describeSessionSpace({ spaceId })).resolves.toMatchObject({ spaceId });
  });

  it('refuses ".." with the error the server gives for it over a socket that keeps dot segments', async () => {
    const { sessionId } = await clientAt(`http://127.0.0.1:${port}`).createSession({ spaceId: t.account.defaultSpaceId, userId: 'dots-compare' });
    const local = (await clientAt(`http://127.0.0.1:${port}`)
      .modifySession({ spaceId: t.account.defaultSpaceId, userId: 'dots-compare', sessionId: '..' }, { title: 'x' })
      .catch((caught: unknown) => caught)) as AgentSessionError;
    // node:http sends the path as written, so the server sees the "..".
    const server = await new Promise<{ status: number; body: { error: { code: string; message: string; details: unknown } } }>((resolve, reject) => {
      const request = http.request(
        { host: '127.0.0.1', port, method: 'PATCH', path: `/v1/spaces/${t.account.defaultSpaceId}/users/dots-compare/sessions/..`, headers: { authorization: `Bearer ${t.account.rootCredential.token}`, 'content-type': 'application/json' } },
        (response) => {
          let text = '';
          response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
          response.on('end', () => resolve({ status: response.statusCode ?? 0, body: JSON.parse(text) }));
        },
      );
      request.on('error', reject).end(JSON.stringify({ title: 'x' }));
    });
    expect({ status: local.status, code: local.code, message: local.message, details: local.details }).toEqual({
      status: server.status,
      code: server.body.error.code,
      message: server.body.error.message,
      details: server.body.error.details,
    });
    expect(local.code).toBe('InvalidParameter');
    expect((await t.db.selectFrom('sessions').select('title').where('session_id', '=', sessionId).executeTakeFirstOrThrow()).title).toBe('');
  });

  it('still sends ids with dots that are not dot segments', async () => {
    const client = clientAt(`http://127.0.0.1:${port}`);
    const created = await client.createSession({ spaceId: t.account.defaultSpaceId, userId: '...' }, { sessionId: '.a.' });
    expect(created).toMatchObject({ userId: '...', sessionId: '.a.' });
    await expect(client.describeSession({ spaceId: t.account.defaultSpaceId, userId: '...', sessionId: '.a.' })).resolves.toMatchObject({ sessionId: '.a.' });
  });
});
