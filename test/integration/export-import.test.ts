import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { insertSpace } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

// A small state limit, so that "state too big" needs only a small document.
let t: TestApp;
beforeAll(async () => {
  t = await createTestApp({ limits: { stateBytes: 4096 } });
});
afterAll(async () => t.close());

const USER = 'user-1';
let counter = 0;

const sessionUrl = (spaceId: string, sessionId: string, userId = USER) => `/v1/spaces/${spaceId}/users/${userId}/sessions/${sessionId}`;
const exportUrl = (spaceId: string, sessionId: string, query = '') => `${sessionUrl(spaceId, sessionId)}/export${query}`;
const importUrl = (spaceId: string) => `/v1/spaces/${spaceId}/sessions/import`;

type Doc = { format: string; session: Record<string, unknown>; events: Record<string, unknown>[] };

/** A session with events, metadata, memo, window, state and scoped keys, in a new space. */
async function richSession(): Promise<{ spaceId: string; sessionId: string }> {
  const spaceId = await insertSpace(t.db, t.account.accountId);
  const sessionId = `s-${++counter}`;
  const created = await t.request({
    method: 'POST',
    url: `/v1/spaces/${spaceId}/users/${USER}/sessions`,
    payload: { sessionId, title: 'Trip to Lyon', metadata: { env: 'prod', 'example.com/agent-id': 'a-1' }, state: { step: 0 } },
  });
  expect(created.statusCode, created.body).toBe(201);
  const appended = await t.request({
    method: 'POST',
    url: `${sessionUrl(spaceId, sessionId)}/events`,
    payload: {
      events: [
        { eventId: 'e-1', author: 'user', content: { role: 'user', parts: [{ text: 'Book a train' }] }, timestamp: '2026-01-02T03:04:05.678Z' },
        {
          eventId: 'e-2',
          invocationId: 'inv-1',
          author: 'planner',
          content: { role: 'model', parts: [{ functionCall: { id: 'c1', name: 'search', args: { to: 'Lyon' } } }] },
          actions: { stateDelta: { step: 1, nested: { a: [1, 2] } } },
          metadata: { model: 'm-1' },
          extensions: { 'x.y': true },
        },
        { author: 'planner', content: { role: 'model', parts: [{ functionResponse: { name: 'search', response: { ok: 1 } } }, { text: '42', thought: true }] }, errorCode: 'E1', errorMessage: 'partial' },
      ],
    },
  });
  expect(appended.statusCode, appended.body).toBe(201);
  const patched = await t.request({ method: 'PATCH', url: sessionUrl(spaceId, sessionId), payload: { memo: { summary: 'wants Lyon', turns: [1, 2] } } });
  expect(patched.statusCode, patched.body).toBe(200);
  // Scoped keys and the window are set directly: this test is about carrying them, not setting them.
  await t.db.updateTable('space_users').set({ state: JSON.stringify({ 'user:lang': 'fr', 'user:prefs': { seat: 'window' } }) }).where('space_id', '=', spaceId).execute();
  await t.db.updateTable('session_spaces').set({ state: JSON.stringify({ 'app:theme': 'dark' }) }).where('space_id', '=', spaceId).execute();
  await t.db.updateTable('sessions').set({ window_start_seq: 2 }).where('space_id', '=', spaceId).where('session_id', '=', sessionId).execute();
  return { spaceId, sessionId };
}

/** Everything the target space holds, to prove that a refused import wrote nothing. */
async function spaceContents(spaceId: string) {
  const sessions = await t.db.selectFrom('sessions').selectAll().where('space_id', '=', spaceId).orderBy('session_id').execute();
  const events = await t.db.selectFrom('events').selectAll().where('space_id', '=', spaceId).orderBy('session_id').orderBy('seq').execute();
  const users = await t.db.selectFrom('space_users').selectAll().where('space_id', '=', spaceId).orderBy('user_id').execute();
  const space = await t.db.selectFrom('session_spaces').select(['state', 'update_time']).where('space_id', '=', spaceId).executeTakeFirst();
  return { sessions, events, users, space };
}

const withoutSpaceId = (doc: Doc) => ({ ...doc, session: { ...doc.session, spaceId: undefined } });

async function exportJson(spaceId: string, sessionId: string): Promise<{ text: string; doc: Doc }> {
  const res = await t.request({ method: 'GET', url: exportUrl(spaceId, sessionId) });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['content-type']).toMatch(/^application\/json/);
  return { text: res.body, doc: JSON.parse(res.body) as Doc };
}

/** The session exported as JSON (`jsonText`) and as YAML, each imported into a new space and exported again. */
async function reimported(spaceId: string, sessionId: string, jsonText: string): Promise<Doc[]> {
  const yamlText = (await t.request({ method: 'GET', url: exportUrl(spaceId, sessionId), headers: { accept: 'application/yaml' } })).body;
  const docs: Doc[] = [];
  for (const [body, contentType] of [[jsonText, 'application/json'], [yamlText, 'application/yaml']] as const) {
    const target = await insertSpace(t.db, t.account.accountId);
    const imported = await t.request({ method: 'POST', url: importUrl(target), payload: body, headers: { 'content-type': contentType } });
    expect(imported.statusCode, `${contentType}: ${imported.body.slice(0, 300)}`).toBe(201);
    docs.push((await exportJson(target, sessionId)).doc);
  }
  return docs;
}

async function expectError(res: { statusCode: number; body: string }, status: number, code: string, field?: string) {
  expect(res.statusCode, res.body).toBe(status);
  const error = JSON.parse(res.body).error;
  expect(error.code).toBe(code);
  if (field) expect(error.details?.issues, res.body).toEqual(expect.arrayContaining([expect.objectContaining({ field })]));
}

describe('GET …/export', () => {
  it('answers every field needed to re-create the session', async () => {
    const { spaceId, sessionId } = await richSession();
    const { doc } = await exportJson(spaceId, sessionId);
    const row = await t.db.selectFrom('sessions').selectAll().where('space_id', '=', spaceId).executeTakeFirstOrThrow();
    expect(doc.format).toBe('agent-session/v1');
    expect(doc.session).toEqual({
      spaceId,
      userId: USER,
      sessionId,
      title: 'Trip to Lyon',
      metadata: { env: 'prod', 'example.com/agent-id': 'a-1' },
      state: { step: 1, nested: { a: [1, 2] } },
      scopedState: { user: { 'user:lang': 'fr', 'user:prefs': { seat: 'window' } }, app: { 'app:theme': 'dark' } },
      memo: { summary: 'wants Lyon', turns: [1, 2] },
      windowStartSeq: 2,
      eventCount: 3,
      revision: row.revision,
      createTime: row.create_time.toISOString(),
      updateTime: row.update_time.toISOString(),
      expireTime: null,
    });
    expect(doc.events.map((event) => [event.seq, event.eventId])).toEqual([
      [1, 'e-1'],
      [2, 'e-2'],
      [3, expect.any(String)],
    ]);
    expect(doc.events[0]).toMatchObject({ timestamp: '2026-01-02T03:04:05.678Z', createTime: expect.any(String) });
    expect(doc.events[1]).toMatchObject({ invocationId: 'inv-1', metadata: { model: 'm-1' }, extensions: { 'x.y': true }, actions: { stateDelta: { step: 1, nested: { a: [1, 2] } } } });
    expect(doc.events[2]).toMatchObject({ errorCode: 'E1', errorMessage: 'partial' });
  });

  it('answers YAML for Accept: application/yaml, text/yaml or ?format=yaml, parsing to the same object as the JSON', async () => {
    const { spaceId, sessionId } = await richSession();
    const { doc } = await exportJson(spaceId, sessionId);
    for (const request of [
      { url: exportUrl(spaceId, sessionId), headers: { accept: 'application/yaml' } },
      { url: exportUrl(spaceId, sessionId), headers: { accept: 'text/yaml' } },
      { url: exportUrl(spaceId, sessionId, '?format=yaml'), headers: { accept: 'application/json' } },
      { url: exportUrl(spaceId, sessionId), headers: { accept: 'application/json;q=0.5, application/yaml' } },
    ]) {
      const res = await t.request({ method: 'GET', ...request });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/yaml/);
      expect(parse(res.body)).toEqual(doc);
    }
  });

  it('answers JSON for ?format=json, */*, and an Accept it does not produce (no 406)', async () => {
    const { spaceId, sessionId } = await richSession();
    const { text } = await exportJson(spaceId, sessionId);
    for (const request of [
      { url: exportUrl(spaceId, sessionId, '?format=json'), headers: { accept: 'application/yaml' } },
      { url: exportUrl(spaceId, sessionId), headers: { accept: '*/*' } },
      { url: exportUrl(spaceId, sessionId), headers: { accept: 'text/html' } },
    ]) {
      const res = await t.request({ method: 'GET', ...request });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(res.body).toBe(text);
    }
    await expectError(await t.request({ method: 'GET', url: exportUrl(spaceId, sessionId, '?format=xml') }), 400, 'InvalidParameter', 'format');
  });

  it('answers 404 for an expired, a missing session, and a missing space', async () => {
    const { spaceId, sessionId } = await richSession();
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('space_id', '=', spaceId).execute();
    await expectError(await t.request({ method: 'GET', url: exportUrl(spaceId, sessionId) }), 404, 'ResourceNotFound.Session');
    await expectError(await t.request({ method: 'GET', url: exportUrl(spaceId, 'nope') }), 404, 'ResourceNotFound.Session');
    await expectError(await t.request({ method: 'GET', url: exportUrl('space-00000000-0000-0000-0000-000000000000', sessionId) }), 404, 'ResourceNotFound.SessionSpace');
  });

  it('answers 404 ResourceNotFound.SessionSpace to another account', async () => {
    const { spaceId, sessionId } = await richSession();
    const other = await t.createAccount();
    await expectError(await t.request({ method: 'GET', url: exportUrl(spaceId, sessionId), token: other.rootCredential.token }), 404, 'ResourceNotFound.SessionSpace');
  });
});

describe('export → import → export', () => {
  it('round-trips through JSON: identical apart from the space id, and the imported events replay', async () => {
    const source = await richSession();
    const first = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);

    const imported = await t.request({ method: 'POST', url: importUrl(target), payload: first.doc });
    expect(imported.statusCode, imported.body).toBe(201);
    const original = await t.request({ method: 'GET', url: sessionUrl(source.spaceId, source.sessionId) });
    expect(imported.json()).toEqual({ ...original.json(), spaceId: target });
    expect(imported.json().state).toEqual({ step: 1, nested: { a: [1, 2] }, 'user:lang': 'fr', 'user:prefs': { seat: 'window' }, 'app:theme': 'dark' });

    const second = await exportJson(target, source.sessionId);
    expect(withoutSpaceId(second.doc)).toEqual(withoutSpaceId(first.doc));
    expect(second.text.replaceAll(target, source.spaceId)).toBe(first.text);
    const user = await t.db.selectFrom('space_users').selectAll().where('space_id', '=', target).executeTakeFirstOrThrow();
    expect(user.session_count).toBe(1);

    // An imported event resent exactly as exported (without seq and createTime) is a replay.
    const { seq: _seq, createTime: _createTime, ...resend } = first.doc.events[1]!;
    const replay = await t.request({ method: 'POST', url: `${sessionUrl(target, source.sessionId)}/events`, payload: resend });
    expect(replay.statusCode, replay.body).toBe(200);
    expect(replay.json().events[0]).toEqual(first.doc.events[1]);
  });

  it('round-trips through YAML, and the YAML import equals the JSON one', async () => {
    const source = await richSession();
    const yamlRes = await t.request({ method: 'GET', url: exportUrl(source.spaceId, source.sessionId), headers: { accept: 'application/yaml' } });
    const target = await insertSpace(t.db, t.account.accountId);
    const imported = await t.request({ method: 'POST', url: importUrl(target), payload: yamlRes.body, headers: { 'content-type': 'application/yaml' } });
    expect(imported.statusCode, imported.body).toBe(201);
    const again = await t.request({ method: 'GET', url: exportUrl(target, source.sessionId, '?format=yaml') });
    expect(again.body.replaceAll(target, source.spaceId)).toBe(yamlRes.body);
    const { doc } = await exportJson(target, source.sessionId);
    expect(withoutSpaceId(parse(yamlRes.body) as Doc)).toEqual(withoutSpaceId(doc));

    // text/yaml is accepted too.
    const third = await insertSpace(t.db, t.account.accountId);
    const viaTextYaml = await t.request({ method: 'POST', url: importUrl(third), payload: yamlRes.body, headers: { 'content-type': 'text/yaml' } });
    expect(viaTextYaml.statusCode, viaTextYaml.body).toBe(201);
  });

  it('round-trips large numbers the API took (1e20, 1e300, 2^60, 1.2345678901234567e22, ±2^53) through JSON and YAML', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const sessionId = `numbers-${++counter}`;
    const numbers = `{"f":1e20,"h":1e300,"p":${JSON.stringify(2 ** 60)},"e":1.2345678901234567e22,"a":9007199254740992,"b":-9007199254740992}`;
    const created = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/${USER}/sessions`, payload: `{"sessionId":"${sessionId}","state":${numbers}}`, headers: { 'content-type': 'application/json' } });
    expect(created.statusCode, created.body).toBe(201);
    const appended = await t.request({ method: 'POST', url: `${sessionUrl(spaceId, sessionId)}/events`, payload: `{"author":"agent","metadata":{"n":${numbers}}}`, headers: { 'content-type': 'application/json' } });
    expect(appended.statusCode, appended.body).toBe(201);
    const { text, doc } = await exportJson(spaceId, sessionId);
    const expected = { f: 1e20, h: 1e300, p: 2 ** 60, e: Number('1.2345678901234567e22'), a: 2 ** 53, b: -(2 ** 53) };
    expect(doc.session.state).toEqual(expected);
    for (const again of await reimported(spaceId, sessionId, text)) {
      expect(again.session.state).toEqual(expected);
      expect(again.events[0]!.metadata).toEqual({ n: expected });
    }
  });

  it('round-trips a session whose state, memo and event content are nested as deep as their own requests allow', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const sessionId = `deep-${++counter}`;
    // A body may nest 256 levels: the object holding state, memo or content is one of them.
    const nested = (levels: number): unknown => (levels === 1 ? { leaf: true } : { d: nested(levels - 1) });
    const created = await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/${USER}/sessions`, payload: { sessionId, state: nested(255) } });
    expect(created.statusCode, created.body).toBe(201);
    const appended = await t.request({ method: 'POST', url: `${sessionUrl(spaceId, sessionId)}/events`, payload: { author: 'agent', metadata: nested(255), content: { parts: [{ functionCall: { name: 'f', args: nested(251) } }] } } });
    expect(appended.statusCode, appended.body).toBe(201);
    const patched = await t.request({ method: 'PATCH', url: sessionUrl(spaceId, sessionId), payload: { memo: nested(255) } });
    expect(patched.statusCode, patched.body).toBe(200);
    const { text, doc } = await exportJson(spaceId, sessionId);
    for (const again of await reimported(spaceId, sessionId, text)) expect(withoutSpaceId(again)).toEqual(withoutSpaceId(doc));
  });

  it('round-trips an event as large as an append may send, to which the service added its eventId and timestamp', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const sessionId = `large-${++counter}`;
    expect((await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/${USER}/sessions`, payload: { sessionId } })).statusCode).toBe(201);
    const limit = 262_144; // MAX_EVENT_BYTES' default
    const text = 'x'.repeat(limit - Buffer.byteLength(JSON.stringify({ author: 'a', content: { parts: [{ text: '' }] } })));
    const event = { author: 'a', content: { parts: [{ text }] } };
    const appended = await t.request({ method: 'POST', url: `${sessionUrl(spaceId, sessionId)}/events`, payload: event });
    expect(appended.statusCode, appended.body.slice(0, 300)).toBe(201);
    // One byte more is refused: the event was at the limit.
    const over = await t.request({ method: 'POST', url: `${sessionUrl(spaceId, sessionId)}/events`, payload: { ...event, author: 'ab' } });
    expect(JSON.parse(over.body).error.code).toBe('LimitExceeded.Event');
    const { text: exported, doc } = await exportJson(spaceId, sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    const imported = await t.request({ method: 'POST', url: importUrl(target), payload: exported, headers: { 'content-type': 'application/json' } });
    expect(imported.statusCode, imported.body.slice(0, 300)).toBe(201);
    expect(withoutSpaceId((await exportJson(target, sessionId)).doc)).toEqual(withoutSpaceId(doc));
    // A byte more than an append could have sent is still refused, naming the event.
    const larger = structuredClone(doc);
    larger.events[0]!.author = 'ab';
    const third = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(third);
    const refused = await t.request({ method: 'POST', url: importUrl(third), payload: larger });
    await expectError(refused, 400, 'InvalidParameter', 'events[0]');
    expect(await spaceContents(third)).toEqual(before);
  });

  it('streams a long history in chunks and round-trips it', async () => {
    const spaceId = await insertSpace(t.db, t.account.accountId);
    const sessionId = `long-${++counter}`;
    expect((await t.request({ method: 'POST', url: `/v1/spaces/${spaceId}/users/${USER}/sessions`, payload: { sessionId } })).statusCode).toBe(201);
    const total = 2345;
    await t.db
      .insertInto('events')
      .values(
        Array.from({ length: total }, (_, index) => ({
          account_id: t.account.accountId,
          space_id: spaceId,
          user_id: USER,
          session_id: sessionId,
          seq: index + 1,
          event_id: `ev-${index + 1}`,
          author: 'user',
          content: JSON.stringify({ parts: [{ text: `message ${index + 1}` }] }),
          event_time: new Date(Date.UTC(2026, 0, 1, 0, 0, 0, index)),
          payload_hash: Buffer.alloc(32),
        })),
      )
      .execute();
    await t.db.updateTable('sessions').set({ event_count: total, revision: total + 1 }).where('space_id', '=', spaceId).execute();

    const first = await exportJson(spaceId, sessionId);
    expect(first.doc.events.map((event) => event.seq)).toEqual(Array.from({ length: total }, (_, index) => index + 1));
    const target = await insertSpace(t.db, t.account.accountId);
    const imported = await t.request({ method: 'POST', url: importUrl(target), payload: first.doc });
    expect(imported.statusCode, imported.body).toBe(201);
    const second = await exportJson(target, sessionId);
    expect(second.text.replaceAll(target, spaceId)).toBe(first.text);
  });

  it('replaces an expired session with the same id, keeping the user\'s session count', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    expect((await t.request({ method: 'POST', url: importUrl(target), payload: doc })).statusCode).toBe(201);
    await t.db.updateTable('sessions').set({ expire_time: new Date(Date.now() - 1000) }).where('space_id', '=', target).execute();
    const res = await t.request({ method: 'POST', url: importUrl(target), payload: doc });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().expireTime).toBeNull();
    const user = await t.db.selectFrom('space_users').selectAll().where('space_id', '=', target).executeTakeFirstOrThrow();
    expect(user.session_count).toBe(1);
  });

  it('merges the scoped keys into the target user and space state: the document\'s keys win, others stay', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    await t.db.updateTable('session_spaces').set({ state: JSON.stringify({ 'app:theme': 'light', 'app:other': 1 }) }).where('space_id', '=', target).execute();
    await t.db.insertInto('space_users').values({ account_id: t.account.accountId, space_id: target, user_id: USER, state: JSON.stringify({ 'user:lang': 'de', 'user:tz': 'UTC' }) }).execute();
    const res = await t.request({ method: 'POST', url: importUrl(target), payload: doc });
    expect(res.statusCode, res.body).toBe(201);
    const after = await spaceContents(target);
    expect(after.space?.state).toEqual({ 'app:theme': 'dark', 'app:other': 1 });
    expect(after.users[0]).toMatchObject({ session_count: 1, state: { 'user:lang': 'fr', 'user:prefs': { seat: 'window' }, 'user:tz': 'UTC' } });
  });
});

describe('POST …/sessions/import: refusals write nothing', () => {
  it('answers 409 ResourceInUse.SessionExists when the session exists in the space', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const before = await spaceContents(source.spaceId);
    const changed = { ...doc, session: { ...doc.session, title: 'other', scopedState: { user: { 'user:lang': 'xx' }, app: { 'app:theme': 'xx' } } } };
    await expectError(await t.request({ method: 'POST', url: importUrl(source.spaceId), payload: changed }), 409, 'ResourceInUse.SessionExists');
    expect(await spaceContents(source.spaceId)).toEqual(before);
  });

  const invalid: [string, (doc: Doc) => unknown, string, string?][] = [
    ['a wrong format string', (doc) => ({ ...doc, format: 'agent-session/v2' }), 'format'],
    ['a seq gap', (doc) => ({ ...doc, events: doc.events.map((event, index) => (index === 1 ? { ...event, seq: 3 } : event)) }), 'events[1].seq'],
    ['a duplicate eventId', (doc) => ({ ...doc, events: doc.events.map((event, index) => (index === 2 ? { ...event, eventId: 'e-1' } : event)) }), 'events[2].eventId'],
    ['an eventCount that is not the number of events', (doc) => ({ ...doc, session: { ...doc.session, eventCount: 4 } }), 'session.eventCount'],
    ['a bad metadata key', (doc) => ({ ...doc, session: { ...doc.session, metadata: { 'bad key!': 'x' } } }), 'session.metadata.bad key!', 'InvalidParameter.Metadata'],
    ['a user-scoped key without its prefix', (doc) => ({ ...doc, session: { ...doc.session, scopedState: { user: { lang: 'fr' }, app: {} } } }), 'session.scopedState.user.lang'],
    ['a window past the last event', (doc) => ({ ...doc, session: { ...doc.session, windowStartSeq: 9 } }), 'session.windowStartSeq'],
    ['an unknown field', (doc) => ({ ...doc, session: { ...doc.session, extra: 1 } }), 'session'],
    ['a bad event', (doc) => ({ ...doc, events: doc.events.map((event, index) => (index === 2 ? { ...event, author: '' } : event)) }), 'events[2].author'],
    ['a missing field', (doc) => ({ ...doc, session: { ...doc.session, revision: undefined } }), 'session.revision', 'MissingParameter'],
    ['a missing memo (a JSON value, null when there is none)', (doc) => ({ ...doc, session: { ...doc.session, memo: undefined } }), 'session.memo', 'MissingParameter'],
  ];

  it.each(invalid)('answers 400 naming the field for %s', async (_name, mutate, field, code = 'InvalidParameter') => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: mutate(doc) as object }), 400, code, field);
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 413 LimitExceeded.State naming the scope for a state over the limit, in the document or once merged, as appends do', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    const big = 'x'.repeat(5000);
    const cases: [unknown, string][] = [
      [{ ...doc, session: { ...doc.session, state: { big } } }, 'session'],
      [{ ...doc, session: { ...doc.session, scopedState: { user: { 'user:big': big }, app: {} } } }, 'user'],
      [{ ...doc, session: { ...doc.session, scopedState: { user: {}, app: { 'app:big': big } } } }, 'app'],
    ];
    // Under the limit in the document, over it once merged into the user's stored state.
    await t.db.insertInto('space_users').values({ account_id: t.account.accountId, space_id: target, user_id: USER, state: JSON.stringify({ 'user:kept': 'y'.repeat(3000) }) }).execute();
    cases.push([{ ...doc, session: { ...doc.session, scopedState: { user: { 'user:more': 'z'.repeat(3000) }, app: {} } } }, 'user']);
    const before = await spaceContents(target);
    for (const [body, scope] of cases) {
      const res = await t.request({ method: 'POST', url: importUrl(target), payload: body as object });
      await expectError(res, 413, 'LimitExceeded.State');
      expect(JSON.parse(res.body).error.details, scope).toMatchObject({ scope, limit: 4096 });
    }
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 400 fast for a YAML alias bomb, and for YAML that does not parse, repeats a key or sets __proto__ or constructor.prototype', async () => {
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    const levels = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'];
    for (let level = 1; level < 10; level++) {
      const previous = String.fromCharCode(96 + level);
      const name = String.fromCharCode(97 + level);
      levels.push(`${name}: &${name} [${Array(9).fill(`*${previous}`).join(',')}]`);
    }
    const started = Date.now();
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: `${levels.join('\n')}\n`, headers: { 'content-type': 'application/yaml' } }), 400, 'InvalidParameter', 'body');
    expect(Date.now() - started).toBeLessThan(2000);
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: 'format: [unclosed\n', headers: { 'content-type': 'application/yaml' } }), 400, 'InvalidParameter', 'body');
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: 'a: 1\na: 2\n', headers: { 'content-type': 'text/yaml' } }), 400, 'InvalidParameter', 'body');
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: 'format: x\n__proto__: { polluted: 1 }\n', headers: { 'content-type': 'application/yaml' } }), 400, 'InvalidParameter', 'body');
    const constructorPrototype = await t.request({ method: 'POST', url: importUrl(target), payload: 'format: x\nsession:\n  constructor: { prototype: { polluted: 1 } }\n', headers: { 'content-type': 'application/yaml' } });
    await expectError(constructorPrototype, 400, 'InvalidParameter', 'body');
    expect(JSON.parse(constructorPrototype.body).error.message).toContain('the key "constructor.prototype" is not allowed');
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 400 for a YAML document nested deeper than an export can be (258 levels), 20,000 levels included, before the parser recurses, and goes on answering', async () => {
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    const cases = [
      `format: x\nsession: ${'['.repeat(258)}${']'.repeat(258)}\n`,
      `format: x\nsession: ${'{a: '.repeat(20_000)}1${'}'.repeat(20_000)}\n`,
      `format: x\nevents:\n${'- '.repeat(20_000)}x\n`,
      // Block style, 259 levels of maps with a scalar at the bottom.
      stringify({ format: 'x', session: Array.from({ length: 258 }).reduce<unknown>((inner) => ({ d: inner }), 1) }),
    ];
    for (const payload of cases) {
      const res = await t.request({ method: 'POST', url: importUrl(target), payload, headers: { 'content-type': 'application/yaml' } });
      await expectError(res, 400, 'InvalidParameter', 'body');
      expect(JSON.parse(res.body).error.message).toContain('nested deeper than 258 levels');
    }
    // 258 levels are read, in flow and in block style (and then judged by the document's rules: here, not an export document).
    for (const payload of [
      `format: x\nsession: ${'['.repeat(257)}${']'.repeat(257)}\n`,
      stringify({ format: 'x', session: Array.from({ length: 257 }).reduce<unknown>((inner) => ({ d: inner }), 1) }),
    ]) {
      const deepest = await t.request({ method: 'POST', url: importUrl(target), payload, headers: { 'content-type': 'application/yaml' } });
      expect(deepest.statusCode).toBe(400);
      expect(JSON.parse(deepest.body).error.message).not.toContain('nested deeper');
    }
    expect((await t.request({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 400 at once for a YAML document that holds itself (an alias inside its own anchor), and goes on answering', async () => {
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    const cases = [
      ['format: x\nsession: &s [1, *s]\n', 'session[1]'],
      ['format: x\nsession: &s { memo: { m: [ *s ] } }\nevents: []\n', 'session.memo.m[0]'],
    ];
    for (const [payload, field] of cases) {
      const started = Date.now();
      const res = await t.request({ method: 'POST', url: importUrl(target), payload, headers: { 'content-type': 'application/yaml' } });
      await expectError(res, 400, 'InvalidParameter', field);
      expect(JSON.parse(res.body).error.message).toContain('an alias refers to a node that contains it');
      expect(Date.now() - started).toBeLessThan(2000);
    }
    // Shared (not cyclic) aliases are still YAML the import reads: they fail on the document's own rules only.
    const shared = await t.request({ method: 'POST', url: importUrl(target), payload: 'format: x\na: &x [1]\nb: [*x, *x]\n', headers: { 'content-type': 'application/yaml' } });
    expect(JSON.parse(shared.body).error.message).not.toContain('alias');
    expect((await t.request({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 400 naming the field for a YAML number JSON does not have (.inf, -.inf, .nan), anywhere in the document', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    const cases: [(doc: Doc) => void, string][] = [
      [(d) => (d.session.state = { x: Number.POSITIVE_INFINITY }), 'session.state.x'],
      [(d) => (d.session.memo = [1, Number.NEGATIVE_INFINITY]), 'session.memo[1]'],
      [(d) => (d.session.metadata = { n: Number.NaN }), 'session.metadata.n'],
      [(d) => ((d.events[1]!.content as { parts: { functionCall: { args: object } }[] }).parts[0]!.functionCall.args = { to: Number.NaN }), 'events[1].content.parts[0].functionCall.args.to'],
    ];
    for (const [change, field] of cases) {
      const changed = structuredClone(doc);
      change(changed);
      const text = stringify(changed);
      expect(text).toMatch(/\.inf|\.nan/);
      const res = await t.request({ method: 'POST', url: importUrl(target), payload: text, headers: { 'content-type': 'application/yaml' } });
      await expectError(res, 400, 'InvalidParameter', field);
      expect(JSON.parse(res.body).error.details.issues).toEqual([{ field, message: 'must be a finite number: JSON has no NaN or Infinity' }]);
    }
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 400 naming the field for a YAML value JSON does not have (a tagged binary, set or timestamp; a collection as a key; keys 1 and "1"; an integer a double does not hold as written; an unknown tag)', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    const notJson = 'must be a JSON value: YAML tags for binary data, sets and timestamps have no JSON counterpart';
    // Each case puts a placeholder where the YAML goes, then writes that YAML in its place.
    const cases: [(doc: Doc) => void, string, string, string][] = [
      [(d) => (d.session.state = { blob: 'PLACEHOLDER' }), '!!binary aGVsbG8=', 'session.state.blob', notJson],
      [(d) => (d.session.state = { tags: 'PLACEHOLDER' }), '!!set { a, b }', 'session.state.tags', notJson],
      [(d) => (d.session.memo = [1, 'PLACEHOLDER']), '!!set { x }', 'session.memo[1]', notJson],
      [(d) => ((d.events[1]!.metadata as Record<string, unknown>).when = 'PLACEHOLDER'), '!!timestamp 2001-12-14', 'events[1].metadata.when', notJson],
      [(d) => (d.session.state = 'PLACEHOLDER'), '{ [1, 2]: pair }', 'session.state', 'must have scalar keys: a YAML key that is a collection, binary data or a timestamp has no JSON counterpart'],
      [(d) => (d.session.state = 'PLACEHOLDER'), '{ 1: a, "1": b }', 'session.state', 'has the key "1" twice: YAML keys that differ only in type (1 and "1") are one JSON key'],
      [
        (d) => (d.session.state = { big: 'PLACEHOLDER' }),
        '12345678901234567890123',
        'session.state.big',
        'must be an integer that a JSON number (a double) holds as written: it would be stored as 1.2345678901234568e+22; send it as a string',
      ],
    ];
    for (const [change, yaml, field, message] of cases) {
      const changed = structuredClone(doc);
      change(changed);
      const text = stringify(changed).replace('PLACEHOLDER', yaml);
      expect(text).toContain(yaml);
      const res = await t.request({ method: 'POST', url: importUrl(target), payload: text, headers: { 'content-type': 'application/yaml' } });
      await expectError(res, 400, 'InvalidParameter', field);
      expect(JSON.parse(res.body).error.details.issues).toEqual([{ field, message }]);
    }
    // A tag the core schema does not resolve would leave its value a string the sender did not mean.
    for (const yaml of ['!custom 1', '!!int 1e400']) {
      const text = stringify({ ...doc, session: { ...doc.session, state: { x: 'PLACEHOLDER' } } }).replace('PLACEHOLDER', yaml);
      const res = await t.request({ method: 'POST', url: importUrl(target), payload: text, headers: { 'content-type': 'application/yaml' } });
      await expectError(res, 400, 'InvalidParameter', 'body');
      expect(JSON.parse(res.body).error.message).toMatch(/Unresolved tag: .*write the value without the tag/);
    }
    expect(await spaceContents(target)).toEqual(before);
    // Integers within a double's exact range are numbers, as in JSON, written in hexadecimal or octal too.
    const exact = structuredClone(doc);
    // An ordered map is an object; scalar keys are their text, as JSON writes them.
    exact.session.state = { largest: 9007199254740991, smallest: -9007199254740991, ordered: 'OMAP', keys: 'KEYS' };
    exact.session.memo = ['HEX', 'OCTAL'];
    const imported = await t.request({
      method: 'POST',
      url: importUrl(target),
      payload: stringify(exact).replace('HEX', '0x1F').replace('OCTAL', '0o17').replace('OMAP', '!!omap [ { b: 1 }, { a: 2 } ]').replace('KEYS', '{ 1: one, true: yes, 2.5: half }'),
      headers: { 'content-type': 'application/yaml' },
    });
    expect(imported.statusCode, imported.body).toBe(201);
    const session = (await exportJson(target, source.sessionId)).doc.session;
    expect(session.state).toEqual({ largest: 9007199254740991, smallest: -9007199254740991, ordered: { b: 1, a: 2 }, keys: { '1': 'one', true: 'yes', '2.5': 'half' } });
    expect(session.memo).toEqual([31, 15]);
  });

  it('answers 404 for a missing space and for another account\'s space', async () => {
    const source = await richSession();
    const { doc } = await exportJson(source.spaceId, source.sessionId);
    await expectError(await t.request({ method: 'POST', url: importUrl('space-00000000-0000-0000-0000-000000000000'), payload: doc }), 404, 'ResourceNotFound.SessionSpace');
    const target = await insertSpace(t.db, t.account.accountId);
    const before = await spaceContents(target);
    const other = await t.createAccount();
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: doc, token: other.rootCredential.token }), 404, 'ResourceNotFound.SessionSpace');
    expect(await spaceContents(target)).toEqual(before);
  });

  it('answers 415 for a body that is neither JSON nor YAML', async () => {
    const target = await insertSpace(t.db, t.account.accountId);
    await expectError(await t.request({ method: 'POST', url: importUrl(target), payload: 'x', headers: { 'content-type': 'text/plain' } }), 415, 'UnsupportedMediaType');
  });
});
