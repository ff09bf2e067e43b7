// AdkSessionService (clients/typescript/src/adk*.ts) against the real server over a socket: the
// contract of ADK's BaseSessionService as its InMemorySessionService tests state it, and where ADK's
// implementations disagree, what docs/adk.md says this service does.
import { type Event, type Session, State, createEvent, createEventActions } from '@google/adk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdkSessionService } from '../../clients/typescript/src/adk.js';
import { AgentSessionError } from '../../clients/typescript/src/index.js';
import { tableFingerprints } from '../support/db-snapshot.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
let baseUrl: string;
beforeAll(async () => {
  t = await createTestApp();
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => t?.close());

let appCounter = 0;
/** A service and an app name of its own, so tests never see each other's sessions or shared state. */
function fresh() {
  const service = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token });
  return { service, appName: `adk-app-${process.pid}-${++appCounter}`, userId: 'user' };
}
/** Events that record where they came from; the server's clock orders sessions by their last change. */
const userEvent = (text: string, extra: Parameters<typeof createEvent>[0] = {}) =>
  createEvent({ invocationId: 'e-1', author: 'user', content: { role: 'user', parts: [{ text }] }, ...extra });

async function rowsOf(table: 'events' | 'sessions', sessionId: string) {
  return t.db.selectFrom(table).selectAll().where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).execute();
}

describe('AdkSessionService: appName → space', () => {
  it('maps an appName to the space of that name, created on first use and found again by a new service object', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const spaces = await t.db.selectFrom('session_spaces').select(['space_id']).where('account_id', '=', t.account.accountId).where('name', '=', appName).execute();
    expect(spaces).toHaveLength(1);
    const other = fresh().service;
    expect(await other.spaceIdOf(appName)).toBe(spaces[0]!.space_id);
    expect((await other.getSession({ appName, userId, sessionId: session.id }))?.id).toBe(session.id);
  });

  it('ends with one space when 12 service objects use a new appName at once', async () => {
    const appName = `adk-raced-${process.pid}-${++appCounter}`;
    const services = Array.from({ length: 12 }, () => fresh().service);
    const sessions = await Promise.all(services.map((service, i) => service.createSession({ appName, userId: `u${i}`, sessionId: `s${i}` })));
    const spaces = await t.db.selectFrom('session_spaces').select(['space_id']).where('account_id', '=', t.account.accountId).where('name', '=', appName).execute();
    expect(spaces).toHaveLength(1);
    const listed = await services[0]!.listSessions({ appName });
    expect(listed.sessions.map((s) => s.id).sort()).toEqual(sessions.map((s) => s.id).sort());
  });

  it('uses the space given in the spaces option and creates none', async () => {
    const space = await t.request({ method: 'POST', url: '/v1/spaces', payload: { name: 'chosen space' } });
    const appName = `adk-mapped-${++appCounter}`;
    const service = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token, spaces: { [appName]: space.json().spaceId } });
    const session = await service.createSession({ appName, userId: 'u1' });
    const [row] = await rowsOf('sessions', session.id);
    expect(row?.space_id).toBe(space.json().spaceId);
    expect(await t.db.selectFrom('session_spaces').select('space_id').where('account_id', '=', t.account.accountId).where('name', '=', appName).execute()).toEqual([]);
  });

  it('rejects an appName that cannot name a space, saying why, before any request', async () => {
    const { service } = fresh();
    const before = await tableFingerprints(t.db);
    await expect(service.createSession({ appName: ' padded ', userId: 'u' })).rejects.toThrow(/appName " padded " cannot name a space/);
    await expect(service.createSession({ appName: 'x'.repeat(129), userId: 'u' })).rejects.toThrow(/1–128 characters/);
    expect(await tableFingerprints(t.db)).toEqual(before);
  });
});

describe('AdkSessionService: createSession', () => {
  it('creates a session with the given state, an id, no events and a lastUpdateTime', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId, state: { key: 'value' } });
    expect(session).toEqual({ id: expect.stringMatching(/^[0-9a-f-]{36}$/), appName, userId, state: { key: 'value' }, events: [], lastUpdateTime: expect.any(Number) });
    const [row] = await rowsOf('sessions', session.id);
    expect(row).toMatchObject({ user_id: userId, state: { key: 'value' } });
    expect(session.lastUpdateTime).toBe(row!.update_time.getTime());
  });

  it('creates a session with a provided sessionId', async () => {
    const { service, appName, userId } = fresh();
    expect((await service.createSession({ appName, userId, sessionId: 'custom-session-id' })).id).toBe('custom-session-id');
  });

  it('rejects a duplicate sessionId and leaves the first session unchanged', async () => {
    const { service, appName, userId } = fresh();
    await service.createSession({ appName, userId, sessionId: 'taken', state: { first: true } });
    const before = await tableFingerprints(t.db);
    const error = await service.createSession({ appName, userId, sessionId: 'taken', state: { second: true } }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(AgentSessionError);
    expect(error).toMatchObject({ code: 'ResourceInUse.SessionExists', status: 412, message: expect.stringContaining('taken already exists') });
    expect(await tableFingerprints(t.db)).toEqual(before);
    expect((await service.getSession({ appName, userId, sessionId: 'taken' }))?.state).toEqual({ first: true });
  });

  it('drops temp: keys of the initial state and stores user: and app: keys in their scopes', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId, state: { normalKey: 'value', 'temp:tempKey': 'tempValue', 'user:name': 'Ada', 'app:tier': 'gold' } });
    expect(session.state).toEqual({ normalKey: 'value', 'user:name': 'Ada', 'app:tier': 'gold' });
    const [row] = await rowsOf('sessions', session.id);
    expect(row!.state).toEqual({ normalKey: 'value' });
    const sibling = await service.createSession({ appName, userId });
    expect(sibling.state).toEqual({ 'user:name': 'Ada', 'app:tier': 'gold' });
    const otherUser = await service.createSession({ appName, userId: 'someone-else' });
    expect(otherUser.state).toEqual({ 'app:tier': 'gold' });
  });

  it('getOrCreateSession (ADK\'s base class) creates a missing session once and then returns it with its events', async () => {
    const { service, appName, userId } = fresh();
    const created = await service.getOrCreateSession({ appName, userId, sessionId: 'goc', state: { v: 1 } });
    await service.appendEvent({ session: created, event: userEvent('hello') });
    const again = await service.getOrCreateSession({ appName, userId, sessionId: 'goc', state: { v: 2 } });
    expect(again.state).toEqual({ v: 1 });
    expect(again.events.map((event) => event.content?.parts?.[0]?.text)).toEqual(['hello']);
    expect(await rowsOf('sessions', 'goc')).toHaveLength(1);
  });

  it('merges existing app and user state into a new session', async () => {
    const { service, appName, userId } = fresh();
    const first = await service.createSession({ appName, userId });
    await service.appendEvent({ session: first, event: createEvent({ author: 'agent', actions: createEventActions({ stateDelta: { [`${State.APP_PREFIX}appKey`]: 'appValue', [`${State.USER_PREFIX}userKey`]: 'userValue' } }) }) });
    const second = await service.createSession({ appName, userId });
    expect(second.state).toEqual({ 'app:appKey': 'appValue', 'user:userKey': 'userValue' });
  });
});

describe('AdkSessionService: getSession', () => {
  it('answers undefined for a session that does not exist', async () => {
    const { service, appName, userId } = fresh();
    expect(await service.getSession({ appName, userId, sessionId: 'non-existent' })).toBeUndefined();
  });

  it('returns the session with merged state and every event in append order', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId, state: { a: 1 } });
    for (let i = 0; i < 3; i++) await service.appendEvent({ session, event: userEvent(`m${i}`) });
    const read = await service.getSession({ appName, userId, sessionId: session.id });
    expect(read?.events.map((event) => event.content?.parts?.[0]?.text)).toEqual(['m0', 'm1', 'm2']);
    expect(read?.state).toEqual({ a: 1 });
    expect(read?.lastUpdateTime).toBe(session.lastUpdateTime);
  });

  it('serves numRecentEvents from the server: the newest N, oldest first', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    for (let i = 0; i < 5; i++) await service.appendEvent({ session, event: userEvent(`m${i}`, { timestamp: 1_700_000_000_000 + i }) });
    const requests: string[] = [];
    const watched = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token, fetch: (input, init) => (requests.push(String(input)), fetch(input, init)) });
    const read = await watched.getSession({ appName, userId, sessionId: session.id, config: { numRecentEvents: 2 } });
    expect(read?.events.map((event) => event.timestamp)).toEqual([1_700_000_000_003, 1_700_000_000_004]);
    const eventRequests = requests.filter((url) => url.includes('/events'));
    expect(eventRequests).toHaveLength(1);
    expect(new URL(eventRequests[0]!).searchParams.get('pageSize')).toBe('2');
    expect(new URL(eventRequests[0]!).searchParams.get('order')).toBe('desc');
  });

  it('serves afterTimestamp from the server (events at or after it), keeping sub-millisecond timestamps and their order', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const base = 1_700_000_000_000;
    // Sub-millisecond steps, two of them in one millisecond, and one appended out of time order.
    const stamps = [base + 1000, base + 2000.25, base + 2000.75, base + 3000.5, base + 2500];
    for (const [i, timestamp] of stamps.entries()) await service.appendEvent({ session, event: userEvent(`m${i}`, { timestamp }) });
    const requests: string[] = [];
    const watched = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token, fetch: (input, init) => (requests.push(String(input)), fetch(input, init)) });

    const after = await watched.getSession({ appName, userId, sessionId: session.id, config: { afterTimestamp: base + 2000.5 } });
    expect(after?.events.map((event) => event.timestamp)).toEqual([base + 2000.75, base + 3000.5, base + 2500]);
    const eventRequest = new URL(requests.find((url) => url.includes('/events'))!);
    expect(eventRequest.searchParams.get('after')).toBe(new Date(base + 1999).toISOString());

    const all = await watched.getSession({ appName, userId, sessionId: session.id });
    expect(all?.events.map((event) => event.timestamp)).toEqual(stamps);
    const both = await watched.getSession({ appName, userId, sessionId: session.id, config: { afterTimestamp: base + 2000, numRecentEvents: 2 } });
    expect(both?.events.map((event) => event.timestamp)).toEqual([base + 3000.5, base + 2500]);
  });

  it('shows app state changed through another session', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const other = await service.createSession({ appName, userId: 'other-user' });
    await service.appendEvent({ session: other, event: createEvent({ author: 'agent', actions: createEventActions({ stateDelta: { 'app:key': 'newValue' } }) }) });
    expect((await service.getSession({ appName, userId, sessionId: session.id }))?.state).toEqual({ 'app:key': 'newValue' });
  });
});

describe('AdkSessionService: listSessions', () => {
  /** Sessions s1..sN, touched in the order given: the last one touched is the newest. */
  async function sessionsTouchedInOrder(service: AdkSessionService, appName: string, userId: string, order: string[]) {
    for (const id of [...order].sort()) await service.createSession({ appName, userId, sessionId: id });
    for (const id of order) {
      const session = (await service.getSession({ appName, userId, sessionId: id }))!;
      await service.appendEvent({ session, event: userEvent(id) });
    }
  }

  it('returns an empty list with zero pagination when there are no sessions, with and without limit', async () => {
    const { service, appName, userId } = fresh();
    expect(await service.listSessions({ appName, userId })).toEqual({ sessions: [], page: 1, limit: 0, totalItems: 0, totalPages: 0 });
    expect(await service.listSessions({ appName, userId, limit: 10 })).toEqual({ sessions: [], page: 1, limit: 10, totalItems: 0, totalPages: 0 });
  });

  it('lists one user\'s sessions without events, with merged state; every user\'s without userId; no other app\'s', async () => {
    const { service, appName } = fresh();
    await service.createSession({ appName, userId: 'user1', sessionId: 'a', state: { k: 1, 'user:u': 'one' } });
    await service.createSession({ appName, userId: 'user1', sessionId: 'b' });
    await service.createSession({ appName, userId: 'user2', sessionId: 'c' });
    await service.createSession({ appName: `${appName}-other`, userId: 'user1', sessionId: 'd' });
    const one = await service.listSessions({ appName, userId: 'user1' });
    expect(one.sessions.map((s) => s.id).sort()).toEqual(['a', 'b']);
    expect(one.sessions.find((s) => s.id === 'a')).toEqual({ id: 'a', appName, userId: 'user1', state: { k: 1, 'user:u': 'one' }, events: [], lastUpdateTime: expect.any(Number) });
    expect(one).toMatchObject({ page: 1, limit: 2, totalItems: 2, totalPages: 1 });
    const all = await service.listSessions({ appName });
    expect(all.sessions.map((s) => `${s.userId}/${s.id}`).sort()).toEqual(['user1/a', 'user1/b', 'user2/c']);
    expect(all.totalItems).toBe(3);
  });

  it('orders by last update: asc oldest first, desc newest first', async () => {
    const { service, appName, userId } = fresh();
    await sessionsTouchedInOrder(service, appName, userId, ['s2', 's3', 's1']);
    expect((await service.listSessions({ appName, userId, order: 'asc' })).sessions.map((s) => s.id)).toEqual(['s2', 's3', 's1']);
    expect((await service.listSessions({ appName, userId, order: 'desc' })).sessions.map((s) => s.id)).toEqual(['s1', 's3', 's2']);
    const desc = await service.listSessions({ appName, order: 'desc' });
    expect(desc.sessions.map((s) => s.id)).toEqual(['s1', 's3', 's2']);
    expect(desc.sessions.map((s) => s.lastUpdateTime)).toEqual([...desc.sessions.map((s) => s.lastUpdateTime)].sort((a, b) => b - a));
  });

  it('pages with limit, offset and page, page winning over offset, with totalItems and totalPages', async () => {
    const { service, appName, userId } = fresh();
    await sessionsTouchedInOrder(service, appName, userId, ['s1', 's2', 's3', 's4', 's5']);
    const ids = async (request: Omit<Parameters<AdkSessionService['listSessions']>[0], 'appName' | 'userId'>) => {
      const response = await service.listSessions({ appName, userId, order: 'asc', ...request });
      return { ids: response.sessions.map((s) => s.id), page: response.page, limit: response.limit, totalItems: response.totalItems, totalPages: response.totalPages };
    };
    expect(await ids({ limit: 3 })).toEqual({ ids: ['s1', 's2', 's3'], page: 1, limit: 3, totalItems: 5, totalPages: 2 });
    expect(await ids({ limit: 2, offset: 1 })).toEqual({ ids: ['s2', 's3'], page: 1, limit: 2, totalItems: 5, totalPages: 3 });
    expect(await ids({ limit: 2, page: 2 })).toEqual({ ids: ['s3', 's4'], page: 2, limit: 2, totalItems: 5, totalPages: 3 });
    expect(await ids({ limit: 2, page: 2, offset: 0 })).toEqual({ ids: ['s3', 's4'], page: 2, limit: 2, totalItems: 5, totalPages: 3 });
    expect(await ids({ limit: 2, page: 3 })).toEqual({ ids: ['s5'], page: 3, limit: 2, totalItems: 5, totalPages: 3 });
    expect(await ids({ limit: 2, offset: 10 })).toEqual({ ids: [], page: 6, limit: 2, totalItems: 5, totalPages: 3 });
    expect(await ids({ limit: 0 })).toEqual({ ids: [], page: 1, limit: 0, totalItems: 5, totalPages: 0 });
    expect(await ids({ offset: 3 })).toEqual({ ids: ['s4', 's5'], page: 1, limit: 5, totalItems: 5, totalPages: 1 });
  });

  it('pages past the server\'s page size of 100', async () => {
    const { service, appName, userId } = fresh();
    const space = await service.spaceIdOf(appName);
    await Promise.all(Array.from({ length: 130 }, (_, i) => t.request({ method: 'POST', url: `/v1/spaces/${space}/users/${userId}/sessions`, payload: { sessionId: `bulk-${String(i).padStart(3, '0')}` } })));
    const all = await service.listSessions({ appName, userId });
    expect(all.sessions).toHaveLength(130);
    const page = await service.listSessions({ appName, userId, limit: 20, page: 6, order: 'asc' });
    expect(page).toMatchObject({ page: 6, limit: 20, totalItems: 130, totalPages: 7 });
    const ascending = (await service.listSessions({ appName, userId, order: 'asc' })).sessions.map((s) => s.id);
    expect(page.sessions.map((s) => s.id)).toEqual(ascending.slice(100, 120));
  });
});

describe('AdkSessionService: deleteSession', () => {
  it('deletes a session and its events', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    await service.appendEvent({ session, event: userEvent('bye') });
    await service.deleteSession({ appName, userId, sessionId: session.id });
    expect(await service.getSession({ appName, userId, sessionId: session.id })).toBeUndefined();
    expect(await rowsOf('events', session.id)).toEqual([]);
  });

  it('does nothing for a session that does not exist', async () => {
    const { service, appName, userId } = fresh();
    await expect(service.deleteSession({ appName, userId, sessionId: 'non-existent' })).resolves.toBeUndefined();
  });

  it('refuses userId or sessionId "." or ".." with the client\'s 400 InvalidParameter before any request, leaving the app\'s empty space', async () => {
    const { service, appName, userId } = fresh();
    const spaceId = await service.spaceIdOf(appName);
    const before = await tableFingerprints(t.db);
    const rule = 'must not be "." or "..": a URL path segment of only dots is removed by clients and proxies (RFC 3986 §5.2.4)';
    for (const [ids, field] of [
      [{ userId: '..', sessionId: '..' }, 'userId'], // was DELETE /v1/spaces/{spaceId}/: the app's space deleted
      [{ userId, sessionId: '..' }, 'sessionId'],
      [{ userId: '.', sessionId: 's' }, 'userId'],
    ] as const) {
      const error = await service.deleteSession({ appName, ...ids }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(AgentSessionError);
      expect(error).toMatchObject({ code: 'InvalidParameter', status: 400, message: `${field}: ${rule}`, details: { issues: [{ field, message: rule }] } });
    }
    await expect(service.getSession({ appName, userId, sessionId: '.' })).rejects.toMatchObject({ code: 'InvalidParameter', status: 400, message: `sessionId: ${rule}` });
    await expect(service.listSessions({ appName, userId: '..' })).rejects.toMatchObject({ code: 'InvalidParameter', status: 400, message: `userId: ${rule}` });
    expect(await tableFingerprints(t.db)).toEqual(before);
    expect(await t.db.selectFrom('session_spaces').select('space_id').where('space_id', '=', spaceId).execute()).toEqual([{ space_id: spaceId }]);
  });

  it('refuses such an id before looking up the app\'s space, so a new appName gets none', async () => {
    const { service, appName } = fresh();
    const before = await tableFingerprints(t.db);
    await expect(service.deleteSession({ appName, userId: '..', sessionId: 'x' })).rejects.toMatchObject({ code: 'InvalidParameter', status: 400 });
    await expect(service.createSession({ appName, userId: 'u', sessionId: '..' })).rejects.toMatchObject({ code: 'InvalidParameter', status: 400 });
    expect(await tableFingerprints(t.db)).toEqual(before);
  });
});

describe('AdkSessionService: appendEvent', () => {
  it('stores the event, updates the caller\'s Session as ADK\'s base class does, and lastUpdateTime from the server', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId, state: { keep: 1 } });
    const event = createEvent({ invocationId: 'e-9', author: 'agent', actions: createEventActions({ stateDelta: { count: 1, 'temp:scratch': 'x', 'user:pref': 'dark', 'app:flag': true } }) });
    const returned = await service.appendEvent({ session, event });
    expect(returned).toBe(event);
    expect(event.actions.stateDelta).toEqual({ count: 1, 'user:pref': 'dark', 'app:flag': true });
    expect(session.events).toEqual([event]);
    expect(session.state).toEqual({ keep: 1, count: 1, 'user:pref': 'dark', 'app:flag': true });
    const [row] = await rowsOf('sessions', session.id);
    expect(session.lastUpdateTime).toBe(row!.update_time.getTime());
    const read = await service.getSession({ appName, userId, sessionId: session.id });
    expect(read?.events).toEqual([event]);
    expect(read?.state).toEqual(session.state);
    expect(read?.lastUpdateTime).toBe(session.lastUpdateTime);
  });

  it('stores state deltas with ADK\'s semantics: a key replaces the value whole, and null is stored', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId, state: { nested: { a: 1, b: 2 }, gone: 'x' } });
    await service.appendEvent({ session, event: createEvent({ author: 'agent', actions: createEventActions({ stateDelta: { nested: { a: 3 }, gone: null } }) }) });
    const read = await service.getSession({ appName, userId, sessionId: session.id });
    expect(read?.state).toEqual({ nested: { a: 3 }, gone: null });
    expect(read?.state).toEqual(session.state);
  });

  it('does not store a partial event, and leaves the caller\'s Session as it was', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const before = { ...session, events: [...session.events] };
    const partial = createEvent({ author: 'agent', partial: true, content: { role: 'model', parts: [{ text: 'Hel' }] }, actions: createEventActions({ stateDelta: { x: 1 } }) });
    expect(await service.appendEvent({ session, event: partial })).toBe(partial);
    expect(session).toEqual(before);
    expect(await rowsOf('events', session.id)).toEqual([]);
    const unknown: Session = { id: 'fake-session', appName, userId, state: {}, events: [], lastUpdateTime: 0 };
    await expect(service.appendEvent({ session: unknown, event: partial })).resolves.toBe(partial);
  });

  it('rejects for a session that does not exist (never created, or deleted), changing nothing anywhere', async () => {
    const { service, appName, userId } = fresh();
    const known = await service.createSession({ appName, userId });
    const stale: Session = { id: 'stale-session', appName, userId, state: {}, events: [], lastUpdateTime: 0 };
    const before = await tableFingerprints(t.db);
    const event = createEvent({ author: 'agent', actions: createEventActions({ stateDelta: { 'app:key': 'value', 'user:key': 'v' } }) });
    await expect(service.appendEvent({ session: stale, event })).rejects.toMatchObject({ code: 'ResourceNotFound.Session', status: 404 });
    expect(stale.events).toEqual([]);
    expect(await tableFingerprints(t.db)).toEqual(before);
    expect((await service.getSession({ appName, userId, sessionId: known.id }))?.state).toEqual({});

    await service.deleteSession({ appName, userId, sessionId: known.id });
    await expect(service.appendEvent({ session: known, event: userEvent('late') })).rejects.toMatchObject({ code: 'ResourceNotFound.Session' });
    expect(known.events).toEqual([]);
  });

  it('appends the same event again as a safe replay: stored once, its delta applied once', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const event = createEvent({ author: 'agent', actions: createEventActions({ stateDelta: { n: 1 } }) });
    await service.appendEvent({ session, event });
    await service.appendEvent({ session, event });
    expect(await rowsOf('events', session.id)).toHaveLength(1);
    expect(session.events).toHaveLength(1);
  });

  it('round-trips every field of a fully populated ADK event, deep-equal', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const event = fullyPopulatedEvent();
    const sent = JSON.stringify(event);
    await service.appendEvent({ session, event });
    expect(JSON.stringify(event)).toBe(sent); // nothing to trim: no temp: keys
    const read = await fresh().service.getSession({ appName, userId, sessionId: session.id });
    expect(read?.events).toHaveLength(1);
    expect(read!.events[0]).toEqual(event);
    // Deep equality that also fails on a key present on one side only (toEqual ignores undefined ones).
    expect(JSON.parse(JSON.stringify(read!.events[0]))).toStrictEqual(JSON.parse(sent));
    // The parts the service understands are its own fields; the rest rides in extensions.adk.
    const [row] = await rowsOf('events', session.id);
    expect(row).toMatchObject({ event_id: event.id, invocation_id: event.invocationId, author: event.author, error_code: 'MAX_TOKENS', error_message: 'cut short' });
    expect((row!.content as { parts: unknown[] }).parts).toEqual([
      { text: 'thinking…', thought: true },
      { functionCall: { id: 'call-1', name: 'lookup', args: { city: 'Paris', days: [1, 2] } } },
      { functionResponse: { id: 'call-1', name: 'lookup', response: { temp: 21.5, ok: true, none: null } } },
      { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } },
      { text: '' },
    ]);
    expect(row!.metadata).toEqual({ trace: 'abc', nested: { deep: [1, { x: 'y' }] } });
  });

  it('round-trips events with missing or unusual fields: no author, no content, fractional and zero timestamps', async () => {
    const { service, appName, userId } = fresh();
    const session = await service.createSession({ appName, userId });
    const odd: Event[] = [
      createEvent({ timestamp: 1_700_000_000_123.456 }),
      { id: 'bare1', invocationId: '', actions: { stateDelta: {}, artifactDelta: {}, requestedAuthConfigs: {}, requestedToolConfirmations: {} }, timestamp: 5 } as Event,
      createEvent({ author: 'a'.repeat(200), invocationId: 'i'.repeat(300), content: { parts: [{ functionCall: { name: 'noArgs' } }] }, errorCode: 'x'.repeat(200) }),
      createEvent({ author: 'model', content: { role: 'model' } }),
    ];
    for (const event of odd) await service.appendEvent({ session, event });
    const read = await service.getSession({ appName, userId, sessionId: session.id });
    expect(JSON.parse(JSON.stringify(read!.events))).toStrictEqual(JSON.parse(JSON.stringify(odd)));
  });
});

/** An event with every field ADK's Event type (and its LlmResponse base) has, each set. */
function fullyPopulatedEvent(): Event {
  return createEvent({
    id: 'evt-full-1',
    invocationId: 'e-0b7c6e9a-1f7e-4c1e-9d1b-6a3f1c2d9e01',
    author: 'weather_agent',
    branch: 'root.weather_agent',
    timestamp: 1_764_590_000_123.5,
    content: {
      role: 'model',
      parts: [
        { text: 'thinking…', thought: true, thoughtSignature: 'c2lnbmF0dXJl' },
        { functionCall: { id: 'call-1', name: 'lookup', args: { city: 'Paris', days: [1, 2] }, willContinue: false } },
        { functionResponse: { id: 'call-1', name: 'lookup', response: { temp: 21.5, ok: true, none: null }, willContinue: true, scheduling: 'WHEN_IDLE' as never } },
        { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=', displayName: 'chart.png' } },
        { fileData: { fileUri: 'gs://bucket/file.pdf', mimeType: 'application/pdf' } },
        { executableCode: { code: 'print(1)', language: 'PYTHON' as never } },
        { codeExecutionResult: { outcome: 'OUTCOME_OK' as never, output: '1\n' } },
        { text: '', videoMetadata: { startOffset: '1s', endOffset: '2s' } },
      ],
    },
    actions: {
      skipSummarization: true,
      stateDelta: { city: 'Paris', 'user:units': 'metric', 'app:calls': 3, cleared: null, deep: { list: [1, 'two', { three: 3 }] } },
      artifactDelta: { 'chart.png': 2 },
      transferToAgent: 'travel_agent',
      escalate: true,
      requestedAuthConfigs: { 'call-1': { authScheme: { type: 'http', scheme: 'bearer' }, credentialKey: 'k1' } as never },
      requestedToolConfirmations: { 'call-1': { hint: 'Allow lookup?', confirmed: false, payload: { city: 'Paris' } } as never },
      agentState: { step: 2 },
      endOfAgent: true,
    },
    longRunningToolIds: ['call-1'],
    partial: false,
    turnComplete: true,
    errorCode: 'MAX_TOKENS',
    errorMessage: 'cut short',
    interrupted: false,
    customMetadata: { trace: 'abc', nested: { deep: [1, { x: 'y' }] } },
    usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 },
    finishReason: 'MAX_TOKENS' as never,
    groundingMetadata: { webSearchQueries: ['paris weather'] },
    citationMetadata: { citations: [{ uri: 'https://example.com', startIndex: 0, endIndex: 4 }] },
    inputTranscription: { text: 'what is the weather', finished: true },
    outputTranscription: { text: 'sunny', finished: true },
    liveSessionResumptionUpdate: { newHandle: 'h1', resumable: true },
    goAway: { timeLeft: '10s' },
    interactionId: 'interaction-1',
    modelVersion: 'scripted-1',
    liveSessionId: 'live-1',
    output: { answer: 42 },
    route: ['sunny', 2, true],
    nodeInfo: { path: 'wf.child.0', outputFor: ['wf.child.0', 'wf'], messageAsOutput: true },
    isolationScope: 'scope-a',
  });
}
