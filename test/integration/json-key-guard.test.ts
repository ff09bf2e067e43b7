// The service keeps the keys a client wrote even after something in its process has taught
// JSON.parse wrong ones (V8's key bug on Node 23–26, src/lib/parse-json.ts): the body parser and
// the json/jsonb columns read from PostgreSQL both go through parseJson. CI runs this file on
// Node 24, which has the bug; the test says how many keys the bare JSON.parse got wrong beside it.
// Answers are read with readJson, not res.json(): the test shares the process it has taught.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readJson } from '../../src/lib/parse-json.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
const USER = 'json-key-user';
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t?.close());

// [key taught to JSON.parse, a key written with an escape that the bug reads as the taught one,
// the key it writes], as JSON text. Each case's object starts with a key of its own, so its shape
// has the taught key as its one way on (see test/unit/parse-json.test.ts); that first key is one
// character and the others two, so jsonb (which orders keys by length first) gives them back in the
// same order, and the read from PostgreSQL meets the same shape.
const CASES: [string, string, string][] = [
  ['a\\\\', 'a\\n', 'a\n'],
  ['\\\\u', '\\u0041B', 'AB'],
  ['\\\\n', '\\nX', '\nX'],
  ['x\\\\', 'x\\"', 'x"'],
  ['\\\\u', '\\u00e9\\u00e9', 'éé'],
];
const FIRST_KEYS = ['!', '#', '$', '%', '&'];

describe('keys written with escapes, after JSON.parse was taught keys with backslashes', () => {
  it('are stored and read back as written, through the body parser and the jsonb columns', async () => {
    let wrongByJsonParse = 0;
    for (const [index, [taught, written, expected]] of CASES.entries()) {
      const first = FIRST_KEYS[index]!;
      JSON.parse(`{"${first}":0,"${taught}":0}`); // a library in the same process teaches the parser
      if (Object.keys(JSON.parse(`{"${first}":0,"${written}":1}`) as object)[1] !== expected) wrongByJsonParse++;

      const sessionId = `s-${randomUUID()}`;
      await insertSession(t.db, { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: USER, sessionId });
      const url = `/v1/spaces/${t.account.defaultSpaceId}/users/${USER}/sessions/${sessionId}`;
      const res = await t.request({
        method: 'POST',
        url: `${url}/events`,
        payload: `{"author":"agent","actions":{"stateDelta":{"${first}":0,"${written}":1}}}`,
        headers: { 'content-type': 'application/json' },
      });
      expect(res.statusCode, res.body).toBe(201);
      const want = { [first]: 0, [expected]: 1 };

      // Stored: PostgreSQL's own text of the state, read without JSON.parse.
      const { rows } = await sql<{ state: string; keys: string[] }>`
        SELECT state::text AS state, ARRAY(SELECT jsonb_object_keys(state)) AS keys FROM sessions WHERE session_id = ${sessionId}`.execute(t.db);
      expect([...rows[0]!.keys].sort()).toEqual(Object.keys(want).sort());
      // Read back: the jsonb column through the service's pg type parser, and the API's answers.
      const read = await sql<{ state: unknown }>`SELECT state FROM sessions WHERE session_id = ${sessionId}`.execute(t.db);
      expect(read.rows[0]!.state).toStrictEqual(want);
      expect((readJson(res.body) as { session: { state: unknown } }).session.state).toStrictEqual(want);
      const described = await t.request({ method: 'GET', url });
      expect((readJson(described.body) as { state: unknown }).state).toStrictEqual(want);
      const events = await t.request({ method: 'GET', url: `${url}/events` });
      expect((readJson(events.body) as { events: { actions: { stateDelta: unknown } }[] }).events[0]!.actions.stateDelta).toStrictEqual(want);
    }
    console.log(`Node ${process.version} (V8 ${process.versions.v8}): the bare JSON.parse read ${wrongByJsonParse} of ${CASES.length} keys wrong beside the service`);
  });
});
