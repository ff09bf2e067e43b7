// Issue 10: numbers JSON cannot carry exactly, -0 and duplicate keys, and bodies in another charset
// than UTF-8. Each refusal is a 4xx naming the field (or the charset) and writes nothing.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
const USER = 'numbers-user';
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t?.close());

async function newSession(): Promise<string> {
  const sessionId = `s-${randomUUID()}`;
  await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
  return sessionId;
}
const sessionUrl = (sessionId: string) => `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}`;
const sessionsUrl = () => `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions`;

async function postRaw(url: string, payload: string, contentType = 'application/json') {
  return t.request({ method: 'POST', url, payload, headers: { 'content-type': contentType } });
}

async function storedState(sessionId: string): Promise<string> {
  const { rows } = await sql<{ state: string }>`SELECT state::text AS state FROM sessions WHERE session_id = ${sessionId}`.execute(t.db);
  return rows[0]!.state;
}

const storedAs = (value: string) => `must be an integer that a JSON number (a double) holds as written: it would be stored as ${value}; send it as a string`;

describe('numbers JSON cannot carry exactly', () => {
  it.each([
    ['22 digits', '12345678901234567890123', '1.2345678901234568e+22'],
    ['2^53 + 1, which parses to 2^53', '9007199254740993', '9007199254740992'],
    ['-(2^53 + 1)', '-9007199254740993', '-9007199254740992'],
    ['2^60 in all its digits, which a double writes 1152921504606847000', '1152921504606846976', '1152921504606847000'],
  ])('refuses %s in a stateDelta with 400 InvalidParameter naming the field, writing nothing', async (_what, literal, stored) => {
    const sessionId = await newSession();
    const before = await tableFingerprints(t.db);
    const res = await postRaw(`${sessionUrl(sessionId)}/events`, `{"author":"agent","actions":{"stateDelta":{"nested":{"big":${literal}}}}}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
    expect(res.json().error.details).toEqual({ issues: [{ field: 'actions.stateDelta.nested.big', message: storedAs(stored) }] });
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('names the field inside a batch and inside an array', async () => {
    const sessionId = await newSession();
    const res = await postRaw(`${sessionUrl(sessionId)}/events`, `{"events":[{"author":"user"},{"author":"agent","content":{"parts":[{"text":"x"}],"n":[1,2,-12345678901234567890123]}}]}`);
    expect(res.statusCode).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
    expect(res.json().error.details.issues[0].field).toBe('events[1].content.n[2]');
  });

  it('refuses it in a session\'s initial state too', async () => {
    const before = await tableFingerprints(t.db);
    const res = await postRaw(sessionsUrl(), '{"state":{"big":12345678901234567890123}}');
    expect(res.statusCode).toBe(400);
    expect(res.json().error.details).toEqual({ issues: [{ field: 'state.big', message: storedAs('1.2345678901234568e+22') }] });
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it.each([
    ['1e400', '1e400', 'actions.stateDelta.nested.big'],
    ['-2E+308', '-2E+308', 'actions.stateDelta.nested.big'],
    ['310 digits and a fraction', `${'9'.repeat(310)}.5`, 'actions.stateDelta.nested.big'],
  ])('refuses %s, beyond a double (JSON.parse makes it Infinity), with 400 naming the field, writing nothing', async (_what, literal, field) => {
    const sessionId = await newSession();
    const before = await tableFingerprints(t.db);
    const res = await postRaw(`${sessionUrl(sessionId)}/events`, `{"author":"agent","actions":{"stateDelta":{"nested":{"big":${literal}}}}}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().error.code).toBe('InvalidParameter');
    expect(res.json().error.details).toEqual({ issues: [{ field, message: 'must be a finite number: JSON has no NaN or Infinity' }] });
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('refuses a number beyond a double in an event\'s content, a batch, a session\'s state and metadata of an event', async () => {
    const sessionId = await newSession();
    const before = await tableFingerprints(t.db);
    const batch = await postRaw(`${sessionUrl(sessionId)}/events`, '{"events":[{"author":"user"},{"author":"agent","content":{"parts":[{"functionCall":{"name":"f","args":{"n":[1,1e999]}}}]}}]}');
    expect(batch.json().error.details.issues).toEqual([{ field: 'events[1].content.parts[0].functionCall.args.n[1]', message: 'must be a finite number: JSON has no NaN or Infinity' }]);
    const metadata = await postRaw(`${sessionUrl(sessionId)}/events`, '{"author":"agent","metadata":{"m":-1e309}}');
    expect(metadata.json().error.details.issues[0].field).toBe('metadata.m');
    const created = await postRaw(sessionsUrl(), '{"state":{"x":1e400}}');
    expect(created.json().error.details.issues[0].field).toBe('state.x');
    for (const res of [batch, metadata, created]) expect(res.statusCode).toBe(400);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('takes back what it answered: integers beyond ±(2^53−1) as a double writes them in full (2^53, 1e20, 2^60 as JSON.stringify writes it, 1e300 and 1.2345678901234567e22 as PostgreSQL writes them)', async () => {
    const sessionId = await newSession();
    const created = await postRaw(`${sessionUrl(sessionId)}/events`, `{"author":"agent","actions":{"stateDelta":{"a":9007199254740992,"b":-9007199254740992,"f":1e20,"p":${JSON.stringify(2 ** 60)},"h":1e300,"e":1.2345678901234567e22}}}`);
    expect(created.statusCode, created.body).toBe(201);
    const stored = await storedState(sessionId);
    expect(stored).toContain('"f": 100000000000000000000');
    expect(stored).toContain(`"h": 1${'0'.repeat(300)}`);
    // The state as the describe answer writes it, digits and all, sent again as a delta: taken, and nothing changes.
    const described = await t.request({ method: 'GET', url: sessionUrl(sessionId) });
    const stateText = /"state"\s*:\s*(\{[^{}]*\})/.exec(described.body)![1]!;
    expect(stateText).toContain('12345678901234568000000');
    const sentAgain = await postRaw(`${sessionUrl(sessionId)}/events`, `{"author":"agent","actions":{"stateDelta":${stateText}}}`);
    expect(sentAgain.statusCode, sentAgain.body).toBe(201);
    expect(await storedState(sessionId)).toBe(stored);
    expect(JSON.parse(stored)).toEqual({ a: 2 ** 53, b: -(2 ** 53), f: 1e20, p: 2 ** 60, h: 1e300, e: Number('1.2345678901234567e22') });
  });

  it('stores the extremes ±(2^53−1) exactly, and numbers with a fraction or exponent as doubles', async () => {
    const sessionId = await newSession();
    const digits = '"a string of 12345678901234567890123 digits, with \\" an escaped quote"';
    const res = await postRaw(
      `${sessionUrl(sessionId)}/events`,
      `{"author":"agent","actions":{"stateDelta":{"max":9007199254740991,"min":-9007199254740991,"f":0.1,"e":1.2345678901234567e22,"huge":1e300,"s":${digits},"12345678901234567890":1}}}`,
    );
    expect(res.statusCode).toBe(201);
    expect(JSON.parse(await storedState(sessionId))).toEqual({
      max: 9007199254740991,
      min: -9007199254740991,
      f: 0.1,
      e: Number('1.2345678901234567e22'),
      huge: 1e300,
      s: 'a string of 12345678901234567890123 digits, with " an escaped quote',
      '12345678901234567890': 1,
    });
    expect(await storedState(sessionId)).toContain('"max": 9007199254740991');
  });
});

describe('-0 and duplicate keys (README: Choices where the SPEC is silent)', () => {
  it('stores -0 as 0', async () => {
    const sessionId = await newSession();
    const res = await postRaw(`${sessionUrl(sessionId)}/events`, '{"author":"agent","actions":{"stateDelta":{"z":-0,"f":-0.0}}}');
    expect(res.statusCode).toBe(201);
    expect(await storedState(sessionId)).toBe('{"f": 0, "z": 0}');
    const described = await t.request({ method: 'GET', url: sessionUrl(sessionId) });
    expect(described.json().state).toEqual({ f: 0, z: 0 });
    // Only a value can be -0: ids in the body hold "-0" (a UUID group starting with 0) by chance.
    expect(described.body).not.toMatch(/[:,[]\s*-0(?![.\d])/);
  });

  it('keeps the last of duplicate keys, at any depth', async () => {
    const sessionId = await newSession();
    const res = await postRaw(`${sessionUrl(sessionId)}/events`, '{"author":"user","author":"agent","actions":{"stateDelta":{"k":1,"k":2,"o":{"a":"first","a":"last"}}}}');
    expect(res.statusCode).toBe(201);
    expect(res.json().event?.author ?? res.json().events?.[0]?.author).toBe('agent');
    expect(JSON.parse(await storedState(sessionId))).toEqual({ k: 2, o: { a: 'last' } });
  });
});

describe('charsets other than UTF-8', () => {
  it.each([
    ['charset=utf-16', 'utf-16'],
    ['charset=UTF-16LE', 'UTF-16LE'],
    ['charset="iso-8859-1"', 'iso-8859-1'],
    ['CHARSET = latin1', 'latin1'],
    ['charset=', ''],
  ])('refuses application/json; %s with 415 UnsupportedMediaType naming the charset, writing nothing', async (parameter, charset) => {
    const before = await tableFingerprints(t.db);
    const res = await postRaw('/v1/spaces', '{"name":"charset"}', `application/json; ${parameter}`);
    expect(res.statusCode).toBe(415);
    expect(res.json().error.code).toBe('UnsupportedMediaType');
    expect(res.json().error.message).toContain(`"${charset}"`);
    expect(changedTables(before, await tableFingerprints(t.db))).toEqual([]);
  });

  it('refuses a YAML import body in another charset too', async () => {
    const res = await postRaw(`/v1/spaces/${t.account.defaultSpaceId}/sessions/import`, 'a: 1\n', 'application/yaml; charset=utf-16');
    expect(res.statusCode).toBe(415);
    expect(res.json().error.code).toBe('UnsupportedMediaType');
  });

  it.each(['charset=utf-8', 'charset=UTF-8', 'charset="utf-8"', 'Charset=Utf-8'])('takes application/json; %s', async (parameter) => {
    const res = await postRaw('/v1/spaces', '{"name":"charset ok"}', `application/json; ${parameter}`);
    expect(res.statusCode).toBe(201);
  });
});
