// Hostile input, property-based (issue 5): every /v1 route the application serves — taken from its
// own OpenAPI document, so a new route is covered without touching this file — gets random and
// malformed bodies, query strings, path ids and headers. For every answer:
//   - the status is never 5xx;
//   - an error is the docs/design.md §6 envelope with a code from src/errors.ts that carries that status;
//   - a 4xx wrote nothing (every table's fingerprint is unchanged), and a GET never writes at all;
//   - a path that names another account's resources never answers 2xx.
// Page tokens get their own properties: a tampered token, or one taken from another list or
// another account, is 400 InvalidParameter.PageToken.
//
// The run's seed (PROPERTY_SEED, test/support/property-seed.ts) and bounded runs (PROPERTY_RUNS explores further);
// PROPERTY_STATS=1 prints the statuses each route answered.
import fc from 'fast-check';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/errors.js';
import { UNSTORABLE_VALUE_MESSAGE } from '../../src/http/error-handler.js';
import {
  type JsonSchema,
  type QueryParameter,
  type RawBody,
  deeplyNestedJson,
  emptyBody,
  fromSchema,
  hostileJson,
  hostilePathSegment,
  hostileQuery,
  mutated,
  storable,
  nonJsonBody,
  refResolver,
  toQueryString,
  validishQuery,
  withInvalidUtf8,
} from '../support/arbitraries.js';
import { WRITTEN_TABLES, changedTables, tableFingerprints } from '../support/db-snapshot.js';
import { PROPERTY_SEED as SEED } from '../support/property-seed.js';
import { createTestApp } from '../support/test-app.js';

const RUNS_PER_ROUTE = Number(process.env.PROPERTY_RUNS ?? 60);
const TAMPER_RUNS = Number(process.env.PROPERTY_RUNS ?? 60) * 3;
// A failure is reported as found, unshrunk: shrinking re-sends hundreds of requests (PROPERTY_SHRINK=1 turns it on).
fc.configureGlobal({ seed: SEED, numRuns: RUNS_PER_ROUTE, endOnFailure: process.env.PROPERTY_SHRINK !== '1' });

// The server's error log, so that a 5xx is reported with its cause.
const serverErrors: string[] = [];
const logger = pino({ level: 'error' }, { write: (line: string) => void serverErrors.push(line) });
// Rate limiting off: thousands of requests from one credential would otherwise become 429s.
const t = await createTestApp({ limits: { rateLimitMax: 0 }, logger });
const openapi = t.app.swagger() as { paths: Record<string, Record<string, Operation>> };
const resolve = refResolver(openapi);

// ---------------------------------------------------------------------------------------------
// The routes, from the application's own OpenAPI document

interface Operation {
  parameters?: (QueryParameter & { in: string; required?: boolean })[];
  requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
}

interface Route {
  /** `POST /v1/spaces/{spaceId}/users/{userId}/sessions`, as the OpenAPI document names it. */
  key: string;
  method: string;
  path: string;
  pathParams: string[];
  query: QueryParameter[];
  headers: QueryParameter[];
  body: JsonSchema | undefined;
}

// GET …/events/stream answers a stream that does not end while the session lives, and app.inject
// waits for the end: it is fuzzed over a socket in test/integration/event-stream.test.ts instead.
const NOT_INJECTABLE = new Set(['/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events/stream']);

const ROUTES: Route[] = Object.entries(openapi.paths)
  .filter(([path]) => path.startsWith('/v1/') && !NOT_INJECTABLE.has(path))
  .flatMap(([path, operations]) =>
    Object.entries(operations).map(([method, operation]): Route => {
      const parameters = operation.parameters ?? [];
      const of = (where: string) => parameters.filter((p) => p.in === where).map(({ name, schema }) => ({ name, schema }));
      return {
        key: `${method.toUpperCase()} ${path}`,
        method: method.toUpperCase(),
        path,
        pathParams: [...path.matchAll(/\{(\w+)\}/g)].map((match) => match[1]!),
        query: of('query'),
        headers: of('header'),
        body: operation.requestBody?.content?.['application/json']?.schema,
      };
    }),
  );

// ---------------------------------------------------------------------------------------------
// Fixtures: one account whose ids the requests mostly aim at, and another account whose ids they
// sometimes aim at (which must never answer 2xx).

interface Ids {
  token: string;
  spaceId: string;
  userId: string;
  sessionId: string;
  eventId: string;
  /** An event's seq (GET …/state-at/{seq}): the fixture session keeps at least two events. */
  seq: string;
  subAccountId: string;
  secretId: string;
}

type IdName = Exclude<keyof Ids, 'token'>;
const ID_NAMES: ReadonlySet<string> = new Set<IdName>(['spaceId', 'userId', 'sessionId', 'eventId', 'seq', 'subAccountId', 'secretId']);
/** Ids unique across accounts: naming another account's is an attempt to reach its data. */
const GLOBAL_IDS: ReadonlySet<string> = new Set<IdName>(['spaceId', 'subAccountId', 'secretId']);

// The fuzzed requests never name these, so the space is never empty (a DELETE of it answers 409)
// and every list keeps at least two items (page tokens need a second page).
const ANCHOR = { userId: 'anchor-user', sessionId: 'anchor-session', secondSessionId: 'fuzz-session-2' };

async function api(token: string, method: InjectOptions['method'], url: string, payload?: object): Promise<LightMyRequestResponse> {
  const res = await t.request({ method, url, token, ...(payload ? { payload } : {}) });
  expect(res.statusCode, `${method} ${url}: ${res.body}`).toBeLessThan(300);
  return res;
}

/** A space with sessions and events, and a sub-account with a credential, made through the API. */
async function makeFixtures(token: string, names: Pick<Ids, 'userId' | 'sessionId' | 'eventId'>): Promise<Ids> {
  const spaceId = (await api(token, 'POST', '/v1/spaces', { name: 'fuzz' })).json().spaceId as string;
  const ids: Ids = { token, spaceId, ...names, seq: '1', subAccountId: '', secretId: '' };
  await api(token, 'POST', `/v1/spaces/${spaceId}/users/${ANCHOR.userId}/sessions`, { sessionId: ANCHOR.sessionId });
  await api(token, 'POST', `/v1/spaces/${spaceId}/users/${ids.userId}/sessions`, { sessionId: ANCHOR.secondSessionId });
  await ensureFixtures(ids);
  await api(token, 'POST', '/v1/iam/subaccounts', { name: 'second' }); // lists of sub-accounts need two
  return ids;
}

/**
 * Re-creates what a successful write may have removed or changed (a deleted session, credential or
 * sub-account, a session given a 1-second TTL), so that later runs still reach real resources.
 */
async function ensureFixtures(ids: Ids, part: 'sessions' | 'iam' | 'all' = 'all'): Promise<void> {
  if (part !== 'iam') await ensureSessionFixtures(ids);
  if (part !== 'sessions') await ensureIamFixtures(ids);
}

async function ensureSessionFixtures(ids: Ids): Promise<void> {
  const base = `/v1/spaces/${ids.spaceId}/users/${ids.userId}/sessions`;
  await sql`UPDATE sessions SET expire_time = NULL WHERE space_id = ${ids.spaceId} AND expire_time IS NOT NULL`.execute(t.db);
  if ((await t.request({ method: 'GET', url: `${base}/${ids.sessionId}`, token: ids.token })).statusCode === 404) {
    await api(ids.token, 'POST', base, { sessionId: ids.sessionId });
  }
  const events = (await api(ids.token, 'GET', `${base}/${ids.sessionId}/events?pageSize=2`)).json().events as unknown[];
  if (events.length < 2) {
    await api(ids.token, 'POST', `${base}/${ids.sessionId}/events`, {
      events: [
        { eventId: ids.eventId, author: 'user', content: { parts: [{ text: 'hello' }] } },
        { author: 'agent', actions: { stateDelta: { counter: 1 } } },
      ],
    });
  }
}

async function ensureIamFixtures(ids: Ids): Promise<void> {
  if (!ids.subAccountId || (await t.request({ method: 'GET', url: `/v1/iam/subaccounts/${ids.subAccountId}`, token: ids.token })).statusCode === 404) {
    ids.subAccountId = (await api(ids.token, 'POST', '/v1/iam/subaccounts', { name: 'fuzz' })).json().subAccountId;
    ids.secretId = '';
  }
  const credentials = (await api(ids.token, 'GET', `/v1/iam/subaccounts/${ids.subAccountId}/credentials`)).json().credentials as { secretId: string }[];
  if (!credentials.some((c) => c.secretId === ids.secretId)) {
    ids.secretId = (await api(ids.token, 'POST', `/v1/iam/subaccounts/${ids.subAccountId}/credentials`)).json().secretId;
  }
}

let mine: Ids;
let other: Ids;
/** Known-good bodies to mutate, per route, where a schema alone rarely produces a valid one. */
const examples = new Map<string, unknown[]>();

beforeAll(async () => {
  mine = await makeFixtures(t.account.rootCredential.token, { userId: 'alice', sessionId: 'fuzz-session', eventId: 'fuzz-event' });
  other = await makeFixtures((await t.createAccount()).rootCredential.token, { userId: 'bob', sessionId: 'other-session', eventId: 'other-event' });
  const exported = (await api(mine.token, 'GET', `/v1/spaces/${mine.spaceId}/users/${mine.userId}/sessions/${mine.sessionId}/export`)).json();
  const session = '/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}';
  examples.set(`POST ${session.replace('/{sessionId}', '')}`, [{ sessionId: 'example', title: 't', metadata: { env: 'prod' }, state: { a: 1 }, ttlSeconds: 3600 }]);
  examples.set(`PATCH ${session}`, [{ title: 'renamed', metadata: { env: 'dev', gone: null }, memo: { note: 'x' }, expireTime: null }]);
  examples.set(`POST ${session}/events`, [
    { author: 'user', content: { role: 'user', parts: [{ text: 'hi' }] }, actions: { stateDelta: { 'user:x': 1, 'app:y': 2, k: null } } },
    { events: [{ author: 'a' }, { author: 'b', eventId: 'example-event', actions: { stateDelta: { n: [1, 2] }, stateDeltaMode: 'replace' } }] },
  ]);
  examples.set(`PUT ${session}/context`, [{ windowStartSeq: 1, memo: { note: 'x' } }, { memo: null }]);
  examples.set('PUT /v1/iam/subaccounts/{subAccountId}/policy', [
    { statements: [{ effect: 'allow', actions: ['session:Describe*'], resources: ['space/*'] }, { effect: 'deny', actions: ['iam:*'], resources: ['*'] }] },
  ]);
  examples.set('POST /v1/spaces/{spaceId}/sessions/import', [
    { ...exported, session: { ...exported.session, sessionId: 'imported' } },
    { ...exported, session: { ...exported.session, sessionId: 'imported-empty', eventCount: 0, windowStartSeq: 1 }, events: [] },
  ]);
});
afterAll(async () => {
  if (process.env.PROPERTY_STATS) printStats();
  await t.close();
});

// ---------------------------------------------------------------------------------------------
// Requests

/** Where a path id comes from: the fixtures of either account, the schema, or the hostile set. */
type IdChoice = { from: 'mine' } | { from: 'other' } | { from: 'generated'; value: string };

type BodyInput = { kind: 'none' } | { kind: 'json'; note: string; value: unknown } | { kind: 'raw'; raw: RawBody };

interface Input {
  ids: Record<string, IdChoice>;
  query: string;
  headers: Record<string, string>;
  body: BodyInput;
}

// Header values a client can send at all: printable ASCII.
const printableHeader = fc.string({ unit: fc.integer({ min: 0x20, max: 0x7e }).map((code) => String.fromCharCode(code)), maxLength: 40 });
const headerValue = fc.oneof(fc.constantFrom('"1"', '"2"', 'W/"1"', '*', '"999999999999999"', '"1", "2"', '', ','), printableHeader);
const acceptValue = fc.constantFrom('application/yaml', 'text/yaml;q=0', 'application/json;q=abc', 'application/yaml;q=1e999', '*/*', 'garbage', ';;', 'text/yaml, application/json;q=2');

function idArbitrary(name: string, route: Route): fc.Arbitrary<IdChoice> {
  const schema = openapi.paths[route.path]?.[route.method.toLowerCase()]?.parameters?.find((p) => p.name === name)?.schema;
  const generated = fc.oneof(fromSchema(schema, resolve).map(String), hostilePathSegment).map((value): IdChoice => ({ from: 'generated', value }));
  if (!ID_NAMES.has(name)) return generated;
  return fc.oneof({ weight: 7, arbitrary: fc.constant<IdChoice>({ from: 'mine' }) }, { weight: 1, arbitrary: fc.constant<IdChoice>({ from: 'other' }) }, { weight: 3, arbitrary: generated });
}

function bodyArbitrary(route: Route): fc.Arbitrary<BodyInput> {
  const json = (note: string) => (value: unknown): BodyInput => ({ kind: 'json', note, value });
  const raw = (arbitrary: fc.Arbitrary<RawBody>) => arbitrary.map((body): BodyInput => ({ kind: 'raw', raw: body }));
  if (!route.body) {
    return fc.oneof(
      { weight: 6, arbitrary: fc.constant<BodyInput>({ kind: 'none' }) },
      { weight: 1, arbitrary: hostileJson(3).map(json('random JSON')) },
      { weight: 1, arbitrary: raw(nonJsonBody('{}')) },
      { weight: 1, arbitrary: raw(emptyBody) },
    );
  }
  const fromExamples = examples.get(route.key);
  const validish = fromExamples ? fc.oneof(fromSchema(route.body, resolve), fc.constantFrom(...fromExamples)) : fromSchema(route.body, resolve);
  return fc.oneof(
    { weight: 4, arbitrary: validish.map(storable).map(json('valid-ish')) },
    { weight: 2, arbitrary: validish.map(json('valid-ish, any text')) },
    { weight: 5, arbitrary: mutated(validish.map(storable)).map(({ mutation, value }) => json(mutation)(value)) },
    { weight: 1, arbitrary: hostileJson(5).map(json('random JSON')) },
    { weight: 1, arbitrary: raw(deeplyNestedJson) },
    { weight: 1, arbitrary: raw(validish.chain((value) => withInvalidUtf8(JSON.stringify(value) ?? 'null'))) },
    { weight: 1, arbitrary: raw(validish.chain((value) => nonJsonBody(JSON.stringify(value) ?? 'null'))) },
    { weight: 1, arbitrary: raw(emptyBody) },
  );
}

function inputArbitrary(route: Route): fc.Arbitrary<Input> {
  const ids = fc.record(Object.fromEntries(route.pathParams.map((name) => [name, idArbitrary(name, route)])) as Record<string, fc.Arbitrary<IdChoice>>);
  const query = fc.oneof(
    { weight: 3, arbitrary: validishQuery(route.query, resolve).map((pairs) => toQueryString(pairs)) },
    { weight: 2, arbitrary: hostileQuery(route.query) },
    { weight: 1, arbitrary: fc.constant('') },
  );
  const headerNames = route.headers.map((h) => h.name);
  // Mostly absent: a wrong If-Match would otherwise stop most requests before the service.
  const sometimes = (value: fc.Arbitrary<string>) => fc.oneof({ weight: 3, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: value });
  const headers = fc
    .tuple(fc.tuple(...headerNames.map(() => sometimes(headerValue))), sometimes(acceptValue))
    .map(([values, accept]) => {
      const named = Object.fromEntries(headerNames.flatMap((name, i) => (values[i] === undefined ? [] : [[name, values[i]!]])));
      return { ...named, ...(accept === undefined ? {} : { accept }) } as Record<string, string>;
    });
  return fc.record({ ids, query, headers, body: bodyArbitrary(route) });
}

function urlFor(route: Route, input: Input): { url: string; aimsAtOther: boolean } {
  let aimsAtOther = false;
  const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => {
    const choice = input.ids[name]!;
    if (choice.from === 'generated') return choice.value;
    if (choice.from === 'other' && GLOBAL_IDS.has(name)) aimsAtOther = true;
    return encodeURIComponent((choice.from === 'mine' ? mine : other)[name as IdName]);
  });
  return { url: path + input.query, aimsAtOther };
}

async function send(route: Route, input: Input): Promise<{ res: LightMyRequestResponse; aimsAtOther: boolean }> {
  const { url, aimsAtOther } = urlFor(route, input);
  const options: InjectOptions = { method: route.method as InjectOptions['method'], url, headers: { ...input.headers } };
  const { body } = input;
  if (body.kind === 'json') {
    options.payload = JSON.stringify(body.value) ?? 'null';
    options.headers!['content-type'] = 'application/json';
  } else if (body.kind === 'raw') {
    options.payload = body.raw.payload;
    if (body.raw.contentType !== undefined) options.headers!['content-type'] = body.raw.contentType;
  }
  const started = Date.now();
  const res = await t.request({ ...options, token: mine.token });
  if (process.env.PROPERTY_TRACE) {
    const what = body.kind === 'json' ? body.note : body.kind === 'raw' ? body.raw.kind : 'no body';
    const error = res.statusCode >= 400 ? ` ${(res.json() as { error?: { message?: string } }).error?.message?.slice(0, 160)}` : '';
    console.log(`${route.method} ${url.slice(0, 120)} [${what.slice(0, 80)}] → ${res.statusCode} in ${Date.now() - started} ms${error}`);
  }
  return { res, aimsAtOther };
}

// ---------------------------------------------------------------------------------------------
// What every answer must satisfy

const KNOWN_CODES: ReadonlySet<string> = new Set(Object.keys(ERROR_STATUS));

function expectCleanAnswer(res: LightMyRequestResponse): void {
  const logged = serverErrors.find((line) => line.includes(String(res.headers['x-request-id'])));
  expect(res.statusCode, `${res.body.slice(0, 300)}\nserver log: ${logged?.slice(0, 1500)}`).toBeLessThan(500);
  if (res.statusCode < 400) return;
  const body = res.json() as { error?: { code?: unknown; message?: unknown; requestId?: unknown } };
  expect(body.error, res.body.slice(0, 500)).toBeDefined();
  const { code, message, requestId } = body.error!;
  expect(KNOWN_CODES.has(code as string), `unknown error code ${String(code)}`).toBe(true);
  expect(ERROR_STATUS[code as keyof typeof ERROR_STATUS], `${String(code)} answered with ${res.statusCode}`).toBe(res.statusCode);
  expect(typeof message === 'string' && message.length > 0).toBe(true);
  // The error handler's backstop for values the database refuses: validation must get there first.
  expect(message, `a value reached the database unvalidated (${res.body.slice(0, 300)})`).not.toBe(UNSTORABLE_VALUE_MESSAGE);
  expect(requestId).toBe(res.headers['x-request-id']);
}

/**
 * What a write accepted can be read back: the session it touched (with its events, context and
 * export) and the lists of the account. A value stored but unreadable (a year-0 timestamp did
 * this) would otherwise surface only in a later, unrelated request.
 */
async function expectReadBack(url: string, res: LightMyRequestResponse): Promise<void> {
  const reads = url.startsWith('/v1/iam/')
    ? ['/v1/iam/subaccounts?pageSize=100', '/v1/iam/credentials']
    : ['/v1/spaces?pageSize=100', `/v1/spaces/${mine.spaceId}/sessions?pageSize=100`];
  let session = /^\/v1\/spaces\/[^/?]+\/users\/[^/?]+\/sessions\/[^/?]+/.exec(url)?.[0];
  if (!session && /\/sessions(\/import)?(\?|$)/.test(url.split('?')[0]!)) {
    const created = res.json() as { spaceId?: string; userId?: string; sessionId?: string };
    if (created.spaceId && created.userId && created.sessionId) session = `/v1/spaces/${created.spaceId}/users/${encodeURIComponent(created.userId)}/sessions/${encodeURIComponent(created.sessionId)}`;
  }
  if (session) reads.push(session, `${session}/events?pageSize=200`, `${session}/context`, `${session}/export`);
  for (const read of reads) {
    const answer = await t.request({ method: 'GET', url: read, token: mine.token });
    expect(answer.statusCode, `after a ${res.statusCode} to ${url.slice(0, 200)}, GET ${read}: ${answer.body.slice(0, 300)}`).toBeLessThan(500);
  }
}

const stats = new Map<string, Map<number, number>>();
function count(route: Route, status: number): void {
  const byStatus = stats.get(route.key) ?? new Map<number, number>();
  byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
  stats.set(route.key, byStatus);
}
function printStats(): void {
  const lines = [...stats].map(([key, byStatus]) => `${key}: ${[...byStatus].sort(([a], [b]) => a - b).map(([s, n]) => `${s}×${n}`).join(' ')}`);
  console.log(`seed ${SEED}, ${RUNS_PER_ROUTE} runs per route\n${lines.join('\n')}`);
}

// ---------------------------------------------------------------------------------------------

describe('the route catalogue', () => {
  it('finds every /v1 route, with the parameters and bodies it takes', () => {
    expect(ROUTES.length).toBeGreaterThanOrEqual(30);
    expect(ROUTES.filter((route) => route.body).length).toBeGreaterThanOrEqual(8);
    for (const route of ROUTES) expect(route.pathParams.filter((name) => !ID_NAMES.has(name)), route.key).toEqual([]);
  });

  it('has example bodies only for routes that exist', () => {
    expect([...examples.keys()].filter((key) => !ROUTES.some((route) => route.key === key))).toEqual([]);
  });

  it('fingerprints every table the migrations create', async () => {
    const tables = await sql<{ name: string }>`
      SELECT table_name AS name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE' AND table_name NOT LIKE 'kysely_%'`.execute(t.db);
    expect(tables.rows.map((row) => row.name).sort()).toEqual([...WRITTEN_TABLES].sort());
  });
});

describe('page tokens', () => {
  const LISTS = ROUTES.filter((route) => route.method === 'GET' && route.query.some((q) => q.name === 'pageToken'));
  const listUrl = (route: Route, ids: Ids) => route.path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(ids[name as IdName]));

  async function realToken(route: Route, ids: Ids): Promise<string> {
    const res = await api(ids.token, 'GET', `${listUrl(route, ids)}?pageSize=1`);
    const token = res.json().nextPageToken as string | undefined;
    expect(token, `${route.key} has no second page`).toBeDefined();
    return token!;
  }

  const expectRefused = (res: LightMyRequestResponse, what: string) => {
    expectCleanAnswer(res);
    expect(res.statusCode, `${what}: ${res.body}`).toBe(400);
    expect(['InvalidParameter.PageToken', 'InvalidParameter']).toContain(res.json().error.code);
  };

  it('finds the paged lists', () => {
    expect(LISTS.map((route) => route.key).sort()).toEqual(expect.arrayContaining(['GET /v1/spaces', 'GET /v1/iam/subaccounts']));
    expect(LISTS.length).toBeGreaterThanOrEqual(6);
  });

  it('accepts an untampered token (the baseline)', async () => {
    for (const route of LISTS) {
      const token = await realToken(route, mine);
      const res = await t.request({ method: 'GET', url: `${listUrl(route, mine)}?pageSize=1&pageToken=${encodeURIComponent(token)}`, token: mine.token });
      expect(res.statusCode, `${route.key}: ${res.body}`).toBe(200);
    }
  });

  const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const tamper = fc.oneof(
    fc.record({ kind: fc.constant('replace'), at: fc.nat(), char: fc.constantFrom(...`${BASE64URL}=+/. %~`) }),
    fc.record({ kind: fc.constant('insert'), at: fc.nat(), char: fc.constantFrom(...`${BASE64URL}=+/. %~`) }),
    fc.record({ kind: fc.constantFrom('delete', 'truncate', 'swap'), at: fc.nat() }),
    fc.record({ kind: fc.constant('flip-bit'), at: fc.nat(), bit: fc.integer({ min: 0, max: 7 }) }),
    fc.record({ kind: fc.constantFrom('base64', 'padded', 'spaced-json', 'reordered-json', 'extra-field', 'uppercase', 'doubled') }),
  );
  type Tamper = { kind: string; at?: number; char?: string; bit?: number };

  function applyTamper(token: string, change: Tamper): string {
    const at = (change.at ?? 0) % token.length;
    const bytes = Buffer.from(token, 'base64url');
    const body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
    switch (change.kind) {
      case 'replace':
        return token.slice(0, at) + change.char + token.slice(at + 1);
      case 'insert':
        return token.slice(0, at) + change.char + token.slice(at);
      case 'delete':
        return token.slice(0, at) + token.slice(at + 1);
      case 'truncate':
        return token.slice(0, at);
      case 'swap':
        return token.slice(0, at) + (token[at + 1] ?? '') + token[at] + token.slice(at + 2);
      case 'flip-bit': {
        const copy = Buffer.from(bytes);
        const index = (change.at ?? 0) % copy.length;
        copy[index] = copy[index]! ^ (1 << change.bit!);
        return copy.toString('base64url');
      }
      case 'base64':
        return bytes.toString('base64').replace(/=+$/, '');
      case 'padded':
        return bytes.toString('base64');
      case 'spaced-json':
        return Buffer.from(JSON.stringify(body, null, 1)).toString('base64url');
      case 'reordered-json':
        return Buffer.from(JSON.stringify(Object.fromEntries(Object.entries(body).reverse()))).toString('base64url');
      case 'extra-field':
        return Buffer.from(JSON.stringify({ ...body, accountId: 'acct-x' })).toString('base64url');
      case 'uppercase':
        return token.toUpperCase();
      default:
        return token + token;
    }
  }

  it('refuses every tampered token with 400', async () => {
    const tokens = new Map<string, string>();
    for (const route of LISTS) tokens.set(route.key, await realToken(route, mine));
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...LISTS), tamper, async (route, change) => {
        const original = tokens.get(route.key)!;
        const tampered = applyTamper(original, change);
        fc.pre(tampered !== original);
        const res = await t.request({ method: 'GET', url: `${listUrl(route, mine)}?pageSize=1&pageToken=${encodeURIComponent(tampered)}`, token: mine.token });
        expectRefused(res, `${route.key} with a token changed by ${JSON.stringify(change)}`);
      }),
      { numRuns: TAMPER_RUNS },
    );
  });

  it("refuses a token from another list, or from another account's same list, with 400", async () => {
    const sources: { label: string; route: Route; ids: Ids; token: string }[] = [];
    for (const route of LISTS) {
      for (const [label, ids] of [['mine', mine], ['other account', other]] as const) {
        sources.push({ label: `${route.key} (${label})`, route, ids, token: await realToken(route, ids) });
      }
    }
    let checked = 0;
    for (const target of LISTS) {
      for (const source of sources) {
        if (source.route === target && source.ids === mine) continue;
        const res = await t.request({ method: 'GET', url: `${listUrl(target, mine)}?pageSize=1&pageToken=${encodeURIComponent(source.token)}`, token: mine.token });
        expectRefused(res, `${target.key} with a token of ${source.label}`);
        checked++;
      }
    }
    expect(checked).toBe(LISTS.length * (2 * LISTS.length) - LISTS.length);
  });
});

for (const route of ROUTES) describe(route.key, () => {
  const isRead = route.method === 'GET';
  const statement = isRead
    ? 'never answers 5xx, answers errors in the envelope, never writes'
    : 'never answers 5xx, answers errors in the envelope, and a 4xx writes nothing';

  it(statement, async () => {
    const start = await tableFingerprints(t.db);
    let last = start;
    await fc.assert(
      fc.asyncProperty(inputArbitrary(route), async (input) => {
        const { res, aimsAtOther } = await send(route, input);
        count(route, res.statusCode);
        expectCleanAnswer(res);
        if (aimsAtOther) expect(res.statusCode, `another account's id answered ${res.statusCode}: ${res.body.slice(0, 300)}`).toBeGreaterThanOrEqual(400);
        if (isRead) return;
        const now = await tableFingerprints(t.db);
        if (res.statusCode >= 400) expect(changedTables(last, now), `a ${res.statusCode} wrote: ${res.body.slice(0, 300)}`).toEqual([]);
        last = now;
        if (res.statusCode < 300) {
          await expectReadBack(urlFor(route, input).url, res);
          await ensureFixtures(mine, route.path.startsWith('/v1/iam/') ? 'iam' : 'sessions');
          last = await tableFingerprints(t.db);
        }
      }),
    );
    if (isRead) expect(changedTables(start, await tableFingerprints(t.db))).toEqual([]);
  });
});
