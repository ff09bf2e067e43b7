import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DEFAULT_LIMITS } from '../../src/config.js';
import type { EventRow, JsonValue } from '../../src/db/schema.js';
import { canonicalJson, sha256 } from '../../src/lib/canonical-json.js';
import { eventDocument, foldedDocuments, planReplays, prepareAppend, writtenEventRow } from '../../src/modules/events/append-plan.js';
import { STORED_SCOPES, type StateDeltaMode, applyStateDelta } from '../../src/modules/state/index.js';
import { thrownAppError } from '../support/app-error.js';

const limits = { ...DEFAULT_LIMITS, stateDeltaBytes: 100, stateDeltaDepth: 3, eventBytes: 2048 };

function storedRow(eventId: string, payload: unknown, seq: number): EventRow {
  return {
    account_id: 'a', space_id: 's', user_id: 'u', session_id: 'x', seq, event_id: eventId, invocation_id: null, author: 'user',
    content: null, actions: null, metadata: null, extensions: null, error_code: null, error_message: null,
    event_time: new Date(0), create_time: new Date(0), payload_hash: sha256(canonicalJson(payload)),
  };
}

const errorOf = thrownAppError;

describe('prepareAppend', () => {
  it('gives every event an id, keeps the given ones, and hashes the event as sent, key order aside', () => {
    const { events, givenIds, repeatsAnId } = prepareAppend({ events: [{ author: 'user' }, { eventId: 'e-1', author: 'agent', metadata: { b: 1, a: 2 } }] }, limits);
    expect(events[0]!.eventId).toMatch(/\S/);
    expect(events[1]!.eventId).toBe('e-1');
    expect(events[1]!.payloadHash).toBe(sha256(canonicalJson({ author: 'agent', eventId: 'e-1', metadata: { a: 2, b: 1 } })).toString('hex'));
    expect(givenIds).toEqual(['e-1']);
    expect(repeatsAnId).toBe(false);
    expect(events.map((e) => e.field)).toEqual(['events[0].', 'events[1].']);
  });

  it('notices the same eventId twice in one request', () => {
    const prepared = prepareAppend({ events: [{ eventId: 'x', author: 'a' }, { eventId: 'x', author: 'a' }] }, limits);
    expect(prepared).toMatchObject({ givenIds: ['x'], repeatsAnId: true });
  });

  it('refuses a delta nested too deep or too large, and an event too large, naming the field', () => {
    const deep = errorOf(() => prepareAppend({ events: [{ author: 'a' }, { author: 'a', actions: { stateDelta: { a: { b: { c: { d: 1 } } } } } }] }, limits));
    expect(deep.code).toBe('InvalidParameter.StateDelta');
    expect(deep.message).toContain('events[1].actions.stateDelta');
    const large = errorOf(() => prepareAppend({ author: 'a', actions: { stateDelta: { k: 'x'.repeat(200) } } }, limits));
    expect(large.code).toBe('InvalidParameter.StateDelta');
    expect(large.message).toContain('actions.stateDelta: is 208 bytes serialized');
    const event = errorOf(() => prepareAppend({ author: 'a', errorMessage: 'x'.repeat(3000) }, limits));
    expect(event.code).toBe('LimitExceeded.Event');
    expect(event.details).toMatchObject({ field: 'body', limit: 2048 });
  });
});

describe('eventDocument', () => {
  it('splits the delta by scope with its mode, and stores no temp: key', () => {
    const [event] = prepareAppend(
      { author: 'a', actions: { stateDelta: { n: 1, 'user:u': 2, 'app:p': null, 'temp:t': 3 }, stateDeltaMode: 'replace' } },
      limits,
    ).events;
    const document = eventDocument(event!);
    expect(document.session).toEqual({ delta: { n: 1 }, mode: 'replace' });
    expect(document.user).toEqual({ delta: { 'user:u': 2 }, mode: 'replace' });
    expect(document.app).toEqual({ delta: { 'app:p': null }, mode: 'replace' });
    expect(document.actions).toEqual({ stateDelta: { n: 1, 'user:u': 2, 'app:p': null }, stateDeltaMode: 'replace' });
  });

  it('leaves out the scopes a delta does not touch and what the event does not have', () => {
    const [event] = prepareAppend({ eventId: 'e', author: 'a', actions: { stateDelta: { 'temp:only': 1 } } }, limits).events;
    const document = eventDocument(event!);
    expect(Object.keys(document).sort()).toEqual(['actions', 'author', 'eventId', 'payloadHash']);
    expect(document.actions).toEqual({ stateDelta: {} });
    expect(document.payloadHash).toMatch(/^[0-9a-f]{64}$/);
    expect(document.payloadHash).toBe(event!.payloadHash);
  });

  it('writes the timestamp at millisecond precision, and the answer row takes the append time without one', () => {
    const [withTime, without] = prepareAppend({ events: [{ author: 'a', timestamp: '2026-01-02T03:04:05.678901Z' }, { author: 'b' }] }, limits).events;
    const appendTime = new Date('2026-12-01T00:00:00.000Z');
    expect(eventDocument(withTime!).timestamp).toBe('2026-01-02T03:04:05.678Z');
    expect(writtenEventRow(eventDocument(withTime!), 7, appendTime)).toMatchObject({ seq: 7, event_time: new Date('2026-01-02T03:04:05.678Z'), create_time: appendTime });
    expect(writtenEventRow(eventDocument(without!), 8, appendTime)).toMatchObject({ seq: 8, event_time: appendTime, author: 'b', content: null });
  });
});

describe('planReplays', () => {
  it('answers a stored event with the same payload, and an id earlier in the request, without writing them again', () => {
    const body = { events: [{ eventId: 'old', author: 'user' }, { eventId: 'new', author: 'user' }, { eventId: 'new', author: 'user' }] };
    const { events } = prepareAppend(body, limits);
    const stored = storedRow('old', { eventId: 'old', author: 'user' }, 4);
    const plan = planReplays(events, new Map([['old', stored]]));
    expect(plan.fresh.map((e) => e.eventId)).toEqual(['new']);
    expect(plan.answers).toEqual([{ stored }, { fresh: 0 }, { fresh: 0 }]);
  });

  it('is a 409 naming the field when a stored eventId comes with another payload', () => {
    const { events } = prepareAppend({ events: [{ author: 'x' }, { eventId: 'old', author: 'someone else' }] }, limits);
    const error = errorOf(() => planReplays(events, new Map([['old', storedRow('old', { eventId: 'old', author: 'user' }, 1)]])));
    expect(error.code).toBe('InvalidParameter.EventIdDuplicate');
    expect(error.details).toEqual({ field: 'events[1].eventId', eventId: 'old' });
  });

  it('is a 409 when the same eventId comes twice in one request with different payloads', () => {
    const { events } = prepareAppend({ events: [{ eventId: 'x', author: 'a' }, { eventId: 'x', author: 'b' }] }, limits);
    expect(errorOf(() => planReplays(events, new Map())).code).toBe('InvalidParameter.EventIdDuplicate');
  });
});

describe('foldedDocuments', () => {
  // Keys shared between steps, so that later steps overwrite, remove and set again; values of every
  // kind, objects included (which keep a scope from folding).
  const key = fc.constantFrom('a', 'b', 'c', 'user:u', 'app:p', 'temp:t', '10'); // no __proto__: bodies with one are refused (http-errors.test.ts)
  const value: fc.Arbitrary<JsonValue> = fc.oneof(
    { weight: 4, arbitrary: fc.oneof(fc.integer(), fc.string({ maxLength: 3 }), fc.boolean(), fc.constant(null)) },
    { weight: 1, arbitrary: fc.array(fc.integer(), { maxLength: 2 }) },
    { weight: 1, arbitrary: fc.dictionary(fc.constantFrom('x', 'y'), fc.oneof(fc.integer(), fc.constant(null)), { maxKeys: 2 }) },
  );
  const stepOf = fc.record({ delta: fc.dictionary(key, value, { maxKeys: 3 }), mode: fc.constantFrom('merge-patch', 'replace') as fc.Arbitrary<StateDeltaMode> });
  const stateOf = fc.dictionary(fc.constantFrom('a', 'b', 'c', 'd'), value, { maxKeys: 4 });

  it("gives each scope the state its steps give in order, and keeps every event's own delta", () => {
    let foldedScopes = 0;
    fc.assert(
      fc.property(fc.array(stepOf, { minLength: 1, maxLength: 6 }), stateOf, stateOf, stateOf, (steps, session, user, app) => {
        const events = prepareAppend({ events: steps.map(({ delta, mode }) => ({ author: 'agent', actions: { stateDelta: delta, stateDeltaMode: mode } })) }, DEFAULT_LIMITS).events;
        const documents = events.map(eventDocument);
        const folded = foldedDocuments(documents);
        const start = { session, user, app };
        for (const scope of STORED_SCOPES) {
          const merge = (docs: typeof documents) =>
            docs.reduce((state, document) => (document[scope] ? applyStateDelta(state, document[scope].delta, document[scope].mode) : state), start[scope]);
          expect(merge(folded)).toEqual(merge(documents));
          const carriers = folded.filter((document) => document[scope] !== undefined).length;
          if (carriers === 1 && documents.filter((document) => document[scope] !== undefined).length > 1) foldedScopes++;
        }
        // What is stored of each event is untouched.
        expect(folded.map(({ session: _s, user: _u, app: _a, ...stored }) => stored)).toEqual(documents.map(({ session: _s, user: _u, app: _a, ...stored }) => stored));
      }),
      { numRuns: 2_000 },
    );
    expect(foldedScopes).toBeGreaterThan(200); // the property saw folds, not only the cases left alone
  });

  it('folds ten one-key deltas into the last event, and leaves steps it cannot fold as they are', () => {
    const documents = prepareAppend({ events: Array.from({ length: 10 }, (_, n) => ({ author: 'agent', actions: { stateDelta: { counter: n, [`k${n % 2}`]: n } } })) }, DEFAULT_LIMITS).events.map(eventDocument);
    const folded = foldedDocuments(documents);
    expect(folded.map((document) => document.session)).toEqual([...Array(9).fill(undefined), { delta: { counter: 9, k1: 9, k0: 8 }, mode: 'merge-patch' }]);
    expect(documents[0]!.session).toEqual({ delta: { counter: 0, k0: 0 }, mode: 'merge-patch' }); // the input is not changed

    const nested = prepareAppend({ events: [{ author: 'a', actions: { stateDelta: { a: { x: 1 } } } }, { author: 'a', actions: { stateDelta: { b: 1 } } }] }, DEFAULT_LIMITS).events.map(eventDocument);
    expect(foldedDocuments(nested)).toBe(nested);
    const storedNull = prepareAppend({ events: [{ author: 'a', actions: { stateDelta: { a: 1 } } }, { author: 'a', actions: { stateDelta: { a: null }, stateDeltaMode: 'replace' as const } }] }, DEFAULT_LIMITS).events.map(eventDocument);
    expect(foldedDocuments(storedNull)).toBe(storedNull);
  });
});
