import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonObject } from '../../src/db/schema.js';
import { newSpaceId } from '../../src/lib/ids.js';
import { insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// A small state limit so that the user and space limits can be reached with small requests.
const LIMITS = { stateBytes: 1024, stateDeltaBytes: 900 };

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ limits: LIMITS });
});
afterAll(async () => t.close());

const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const sessionsUrl = (spaceId: string, userId: string) => `/v1/spaces/${spaceId}/users/${userId}/sessions`;

async function createSession(spaceId: string, userId: string, body: JsonObject = {}): Promise<string> {
  const res = await t.request({ method: 'POST', url: sessionsUrl(spaceId, userId), payload: body });
  expect(res.statusCode).toBe(201);
  return res.json().sessionId;
}

function append(spaceId: string, userId: string, sessionId: string, payload: JsonObject) {
  return t.request({ method: 'POST', url: `${sessionsUrl(spaceId, userId)}/${sessionId}/events`, payload });
}

async function describeState(spaceId: string, userId: string, sessionId: string): Promise<JsonObject> {
  const res = await t.request({ method: 'GET', url: `${sessionsUrl(spaceId, userId)}/${sessionId}` });
  expect(res.statusCode).toBe(200);
  return res.json().state;
}

const accountId = () => t.account.accountId;

async function storedSessionState(spaceId: string, userId: string, sessionId: string) {
  const row = await t.db
    .selectFrom('sessions')
    .select(['state', 'revision', 'event_count'])
    .where('account_id', '=', accountId())
    .where('space_id', '=', spaceId)
    .where('user_id', '=', userId)
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  return row;
}

async function storedUserState(spaceId: string, userId: string): Promise<JsonObject | undefined> {
  const row = await t.db
    .selectFrom('space_users')
    .select('state')
    .where('account_id', '=', accountId())
    .where('space_id', '=', spaceId)
    .where('user_id', '=', userId)
    .executeTakeFirst();
  return row?.state;
}

async function storedSpaceState(spaceId: string): Promise<JsonObject> {
  const row = await t.db.selectFrom('session_spaces').select('state').where('account_id', '=', accountId()).where('space_id', '=', spaceId).executeTakeFirstOrThrow();
  return row.state;
}

describe('user: keys', () => {
  it('written in one session are seen by every session of the same user, and by no other user', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const [ada, bob] = [uid('ada'), uid('bob')];
    const s1 = await createSession(spaceId, ada);
    const s2 = await createSession(spaceId, ada);
    const other = await createSession(spaceId, bob);

    const res = await append(spaceId, ada, s1, { author: 'agent', actions: { stateDelta: { 'user:lang': 'fr', topic: 'tea' } } });
    expect(res.statusCode).toBe(201);
    expect(res.json().session.state).toEqual({ 'user:lang': 'fr', topic: 'tea' });

    expect(await describeState(spaceId, ada, s2)).toEqual({ 'user:lang': 'fr' });
    expect(await describeState(spaceId, bob, other)).toEqual({});
    // Stored once, in the user's row, with its prefix; the session keeps only its own keys.
    expect(await storedUserState(spaceId, ada)).toEqual({ 'user:lang': 'fr' });
    expect((await storedSessionState(spaceId, ada, s1)).state).toEqual({ topic: 'tea' });
    expect(await storedUserState(spaceId, bob)).toEqual({});

    // A delta from session 2 sees and changes the same user state; null deletes the key (merge-patch).
    const changed = await append(spaceId, ada, s2, { author: 'agent', actions: { stateDelta: { 'user:lang': null, 'user:tz': 'UTC' } } });
    expect(changed.json().session.state).toEqual({ 'user:tz': 'UTC' });
    expect(await describeState(spaceId, ada, s1)).toEqual({ 'user:tz': 'UTC', topic: 'tea' });
  });

  it('an append that only changes user state still appends the event and bumps the revision', async () => {
    const spaceId = t.account.defaultSpaceId;
    const user = uid('rev');
    const sessionId = await createSession(spaceId, user, { state: { own: 1 } });
    const before = await storedSessionState(spaceId, user, sessionId);
    const res = await append(spaceId, user, sessionId, { author: 'agent', actions: { stateDelta: { 'user:seen': true } } });
    expect(res.statusCode).toBe(201);
    expect(res.headers.etag).toBe(`"${before.revision + 1}"`);
    const after = await storedSessionState(spaceId, user, sessionId);
    expect(after).toEqual({ state: { own: 1 }, revision: before.revision + 1, event_count: 1 });
  });

  it('replace mode applies to the user scope too: the value is replaced whole and null is stored', async () => {
    const spaceId = t.account.defaultSpaceId;
    const user = uid('replace');
    const sessionId = await createSession(spaceId, user);
    await append(spaceId, user, sessionId, { author: 'a', actions: { stateDelta: { 'user:profile': { name: 'Ada', lang: 'en' }, 'app:x': 1 } } });
    const res = await append(spaceId, user, sessionId, {
      author: 'a',
      actions: { stateDelta: { 'user:profile': { lang: 'fr' }, 'user:none': null, 'app:x': null }, stateDeltaMode: 'replace' },
    });
    expect(res.statusCode).toBe(201);
    expect(await storedUserState(spaceId, user)).toEqual({ 'user:profile': { lang: 'fr' }, 'user:none': null });
    expect(await storedSpaceState(spaceId)).toHaveProperty('app:x', null);
    // Clean the shared default space for the other tests.
    await append(spaceId, user, sessionId, { author: 'a', actions: { stateDelta: { 'app:x': null } } });
    expect(await storedSpaceState(spaceId)).not.toHaveProperty('app:x');
  });
});

describe('app: keys', () => {
  it('are seen by every session of every user of the space, and not in another space', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const otherSpace = await insertSpace(t.db, accountId());
    const [ada, bob] = [uid('ada'), uid('bob')];
    const s1 = await createSession(spaceId, ada);
    const s2 = await createSession(spaceId, bob);
    const elsewhere = await createSession(otherSpace, ada);

    const res = await append(spaceId, ada, s1, { author: 'ops', actions: { stateDelta: { 'app:motd': 'hello', 'user:name': 'Ada' } } });
    expect(res.statusCode).toBe(201);
    expect(res.json().session.state).toEqual({ 'app:motd': 'hello', 'user:name': 'Ada' });
    expect(await describeState(spaceId, bob, s2)).toEqual({ 'app:motd': 'hello' });
    expect(await describeState(otherSpace, ada, elsewhere)).toEqual({});
    expect(await storedSpaceState(spaceId)).toEqual({ 'app:motd': 'hello' });
    expect(await storedSpaceState(otherSpace)).toEqual({});
    expect((await storedSessionState(spaceId, ada, s1)).state).toEqual({});
  });
});

describe('temp: keys', () => {
  it('are never stored: not in any state, not in the stored event; a retry of the event as sent is still a replay', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const user = uid('temp');
    const sessionId = await createSession(spaceId, user, { state: { 'temp:init': 1, keep: 1 } });
    const event = { eventId: 'with-temp', author: 'a', actions: { stateDelta: { 'temp:scratch': { big: 'x' }, 'user:k': 1, 'app:k': 2, k: 3 } } };
    const res = await append(spaceId, user, sessionId, event);
    expect(res.statusCode).toBe(201);
    expect(res.json().events[0].actions).toEqual({ stateDelta: { 'user:k': 1, 'app:k': 2, k: 3 } });
    expect(res.json().session.state).toEqual({ keep: 1, k: 3, 'user:k': 1, 'app:k': 2 });

    const retry = await append(spaceId, user, sessionId, event);
    expect(retry.statusCode).toBe(200);
    expect(retry.json().events).toEqual(res.json().events);

    const storedEvent = await t.db
      .selectFrom('events')
      .select('actions')
      .where('account_id', '=', accountId())
      .where('space_id', '=', spaceId)
      .where('session_id', '=', sessionId)
      .executeTakeFirstOrThrow();
    const everything = JSON.stringify([
      (await storedSessionState(spaceId, user, sessionId)).state,
      await storedUserState(spaceId, user),
      await storedSpaceState(spaceId),
      storedEvent.actions,
    ]);
    expect(everything).not.toContain('temp:');
    expect(storedEvent.actions).toEqual({ stateDelta: { 'user:k': 1, 'app:k': 2, k: 3 } });
  });
});

describe('session create with scoped keys', () => {
  it('sends user: and app: keys of the initial state to their scopes; 200 on a re-create shows the merged view', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const user = uid('init');
    const body = { sessionId: 'first', state: { own: 1, 'user:tier': 'gold', 'app:mode': 'beta', 'temp:x': 1 } };
    const created = await t.request({ method: 'POST', url: sessionsUrl(spaceId, user), payload: body });
    expect(created.statusCode).toBe(201);
    expect(created.json().state).toEqual({ own: 1, 'user:tier': 'gold', 'app:mode': 'beta' });
    expect(await storedUserState(spaceId, user)).toEqual({ 'user:tier': 'gold' });
    expect(await storedSpaceState(spaceId)).toEqual({ 'app:mode': 'beta' });
    expect((await storedSessionState(spaceId, user, 'first')).state).toEqual({ own: 1 });

    // The existing session is answered unchanged, and the request's scoped keys are ignored too.
    const again = await t.request({ method: 'POST', url: sessionsUrl(spaceId, user), payload: { ...body, state: { 'user:tier': 'silver' } } });
    expect(again.statusCode).toBe(200);
    expect(again.json().state).toEqual({ own: 1, 'user:tier': 'gold', 'app:mode': 'beta' });
    expect(await storedUserState(spaceId, user)).toEqual({ 'user:tier': 'gold' });

    // A second session of the user starts with the shared keys in its view.
    const second = await t.request({ method: 'POST', url: sessionsUrl(spaceId, user), payload: { state: { mine: true } } });
    expect(second.json().state).toEqual({ mine: true, 'user:tier': 'gold', 'app:mode': 'beta' });
  });
});

describe('merged view on every read', () => {
  it('describe, PATCH, user list and space list all show session keys plus user: and app: keys', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const [ada, bob] = [uid('ada'), uid('bob')];
    const s1 = await createSession(spaceId, ada, { state: { n: 1 } });
    const s2 = await createSession(spaceId, bob, { state: { n: 2 } });
    await append(spaceId, ada, s1, { author: 'a', actions: { stateDelta: { 'user:a': 'ada', 'app:shared': true } } });
    await append(spaceId, bob, s2, { author: 'a', actions: { stateDelta: { 'user:b': 'bob' } } });
    const expected: Record<string, JsonObject> = {
      [s1]: { n: 1, 'user:a': 'ada', 'app:shared': true },
      [s2]: { n: 2, 'user:b': 'bob', 'app:shared': true },
    };

    const patched = await t.request({ method: 'PATCH', url: `${sessionsUrl(spaceId, ada)}/${s1}`, payload: { title: 'renamed' } });
    expect(patched.statusCode).toBe(200);
    expect(patched.json().state).toEqual(expected[s1]);

    const userList = await t.request({ method: 'GET', url: sessionsUrl(spaceId, ada) });
    expect(userList.json().sessions.map((s: { state: JsonObject }) => s.state)).toEqual([expected[s1]]);

    const spaceList = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/sessions?pageSize=1` });
    const page2 = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/sessions?pageSize=1&pageToken=${spaceList.json().nextPageToken}` });
    const listed = [...spaceList.json().sessions, ...page2.json().sessions];
    expect(listed).toHaveLength(2);
    for (const session of listed) expect(session.state).toEqual(expected[session.sessionId]);

    const filtered = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/sessions?userId=${bob}&includeTotal=true` });
    expect(filtered.json().sessions.map((s: { state: JsonObject }) => s.state)).toEqual([expected[s2]]);
    expect(filtered.json().totalCount).toBe(1);
  });
});

describe('GET …/users/{userId}/state', () => {
  it("answers only the user's user: keys", async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const user = uid('state');
    const sessionId = await createSession(spaceId, user, { state: { own: 1 } });
    await append(spaceId, user, sessionId, { author: 'a', actions: { stateDelta: { 'user:lang': 'fr', 'app:x': 1, s: 2 } } });
    const res = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users/${user}/state` });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ userId: user, state: { 'user:lang': 'fr' } });
  });

  it('answers an empty state for a user that does not exist in the space', async () => {
    const res = await t.request({ method: 'GET', url: `/v1/spaces/${t.account.defaultSpaceId}/users/${uid('nobody')}/state` });
    expect(res.statusCode).toBe(200);
    expect(res.json().state).toEqual({});
  });

  it('is 404 ResourceNotFound.SessionSpace for an unknown space and for another account\'s space', async () => {
    const missing = await t.request({ method: 'GET', url: `/v1/spaces/${newSpaceId()}/users/u/state` });
    expect(missing.statusCode).toBe(404);
    expect(missing.json().error.code).toBe('ResourceNotFound.SessionSpace');
    const other = await t.createAccount();
    const foreign = await t.request({ method: 'GET', url: `/v1/spaces/${other.defaultSpaceId}/users/u/state` });
    expect(foreign.statusCode).toBe(404);
    expect(foreign.json().error.code).toBe('ResourceNotFound.SessionSpace');
  });
});

describe('state size limit per scope', () => {
  it('413 LimitExceeded.State when the user state would exceed the limit; nothing is written', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const user = uid('big');
    const s1 = await createSession(spaceId, user);
    const s2 = await createSession(spaceId, user);
    // Each delta fits, and each session's own state stays small: only the shared user state grows.
    const ok = await append(spaceId, user, s1, { author: 'a', actions: { stateDelta: { 'user:a': 'x'.repeat(600) } } });
    expect(ok.statusCode).toBe(201);
    const before = { session: await storedSessionState(spaceId, user, s2), user: await storedUserState(spaceId, user), app: await storedSpaceState(spaceId) };

    const res = await append(spaceId, user, s2, { author: 'a', actions: { stateDelta: { 'user:b': 'y'.repeat(600), own: 1, 'app:c': 1 } } });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('LimitExceeded.State');
    expect(res.json().error.details).toMatchObject({ scope: 'user', limit: LIMITS.stateBytes });

    expect(await storedSessionState(spaceId, user, s2)).toEqual(before.session);
    expect(await storedUserState(spaceId, user)).toEqual(before.user);
    expect(await storedSpaceState(spaceId)).toEqual(before.app);
    const events = await t.db.selectFrom('events').select('seq').where('account_id', '=', accountId()).where('session_id', '=', s2).execute();
    expect(events).toEqual([]);
  });

  it('413 when a create would take the space state over the limit; no session, user or state is written', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const user = uid('bigapp');
    const first = await t.request({ method: 'POST', url: sessionsUrl(spaceId, user), payload: { state: { 'app:a': 'x'.repeat(600) } } });
    expect(first.statusCode).toBe(201);
    const sessionsBefore = await t.db.selectFrom('sessions').select('session_id').where('account_id', '=', accountId()).where('space_id', '=', spaceId).execute();

    const res = await t.request({ method: 'POST', url: sessionsUrl(spaceId, user), payload: { sessionId: 'too-big', state: { 'app:b': 'y'.repeat(600), 'user:u': 1 } } });
    expect(res.statusCode).toBe(413);
    expect(res.json().error.code).toBe('LimitExceeded.State');
    expect(res.json().error.details).toMatchObject({ scope: 'app' });
    const sessionsAfter = await t.db.selectFrom('sessions').select('session_id').where('account_id', '=', accountId()).where('space_id', '=', spaceId).execute();
    expect(sessionsAfter).toEqual(sessionsBefore);
    expect(await storedSpaceState(spaceId)).toEqual({ 'app:a': 'x'.repeat(600) });
    expect(await storedUserState(spaceId, user)).toEqual({});
  });
});

describe('space delete with scoped state', () => {
  it('is refused while user or space state remains, and allowed once it is gone', async () => {
    const spaceId = await insertSpace(t.db, accountId());
    const user = uid('del');
    const sessionId = await createSession(spaceId, user);
    await append(spaceId, user, sessionId, { author: 'a', actions: { stateDelta: { 'user:k': 1, 'app:k': 1 } } });
    const deleted = await t.request({ method: 'DELETE', url: `${sessionsUrl(spaceId, user)}/${sessionId}` });
    expect(deleted.statusCode).toBe(204);

    const refused = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}` });
    expect(refused.statusCode).toBe(409);
    expect(refused.json().error.code).toBe('ResourceInUse.SessionSpaceNotEmpty');
    expect(await storedSpaceState(spaceId)).toEqual({ 'app:k': 1 });
    expect(await storedUserState(spaceId, user)).toEqual({ 'user:k': 1 });

    // The user still exists (it has user state) and its state is readable without a session.
    const state = await t.request({ method: 'GET', url: `/v1/spaces/${spaceId}/users/${user}/state` });
    expect(state.json().state).toEqual({ 'user:k': 1 });

    // Clear the user key through a new session: the space state alone still blocks the delete.
    const cleaner = await createSession(spaceId, user);
    await append(spaceId, user, cleaner, { author: 'a', actions: { stateDelta: { 'user:k': null } } });
    await t.request({ method: 'DELETE', url: `${sessionsUrl(spaceId, user)}/${cleaner}` });
    const stillApp = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}` });
    expect(stillApp.statusCode).toBe(409);
    expect(stillApp.json().error.code).toBe('ResourceInUse.SessionSpaceNotEmpty');

    const last = await createSession(spaceId, user);
    await append(spaceId, user, last, { author: 'a', actions: { stateDelta: { 'app:k': null } } });
    await t.request({ method: 'DELETE', url: `${sessionsUrl(spaceId, user)}/${last}` });
    const gone = await t.request({ method: 'DELETE', url: `/v1/spaces/${spaceId}` });
    expect(gone.statusCode).toBe(204);
  });
});
