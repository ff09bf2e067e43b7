import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_LIMITS } from '../../src/config.js';
import { compiledSchema } from '../../src/lib/compiled-schema.js';
import { sessionSchemas } from '../../src/modules/sessions/index.js';
import { JsonObject, JsonValue, SessionPath } from '../../src/http/schemas.js';
import { EventInput, IfMatchHeaders, eventBatchInput } from '../../src/modules/events/events.schemas.js';
import { fromSchema, mutated, refResolver } from '../support/arbitraries.js';

const document: unknown = JSON.parse(readFileSync(new URL('../../openapi/openapi.json', import.meta.url), 'utf8'));
const resolve = refResolver(document);
const appendEvent = fromSchema(resolve('#/components/schemas/AppendEvent'), resolve);
const batch = fc.array(appendEvent, { minLength: 1, maxLength: 4 }).map((events) => ({ events }));

/** What a validator makes of `value`: the parsed value, or the issues the runtime names. */
const outcome = (schema: z.ZodType, value: unknown) => {
  const result = schema.safeParse(value);
  return result.success ? { data: result.data } : { issues: result.error.issues };
};

describe('compiled request validation', () => {
  it("compiles the append's schemas whole: none of them falls back to the runtime parser", () => {
    // strict: a schema the compiler cannot model throws instead of being left uncompiled, so a
    // change that takes the append off the compiled path fails here.
    for (const schema of [EventInput, eventBatchInput(100), SessionPath, IfMatchHeaders, JsonObject]) {
      expect(() => z.compile(schema, { strict: true })).not.toThrow();
    }
  });

  it('compiles each schema once and answers the same clone', () => {
    expect(compiledSchema(EventInput)).toBe(compiledSchema(EventInput));
    expect(compiledSchema(EventInput)).not.toBe(EventInput);
  });

  it("builds the sessions' schemas once per limits, so the API 3.0 face, which asks for them per request, compiles them once", () => {
    const limits = { ...DEFAULT_LIMITS };
    expect(sessionSchemas(limits)).toBe(sessionSchemas(limits));
    expect(sessionSchemas(limits).CreateSessionBody).toBe(sessionSchemas(limits).CreateSessionBody);
    expect(sessionSchemas({ ...DEFAULT_LIMITS, titleChars: 10 }).CreateSessionBody).not.toBe(sessionSchemas(limits).CreateSessionBody);
  });

  it('accepts and refuses exactly what the runtime parser does, with the same value or the same issues', () => {
    const single = compiledSchema(EventInput);
    const many = compiledSchema(eventBatchInput(100));
    fc.assert(
      fc.property(fc.oneof(appendEvent, mutated(appendEvent).map((m) => m.value)), (value) => {
        expect(outcome(single, value)).toEqual(outcome(EventInput, value));
      }),
      { numRuns: 2_000 },
    );
    fc.assert(
      fc.property(fc.oneof(batch, mutated(batch).map((m) => m.value)), (value) => {
        expect(outcome(many, value)).toEqual(outcome(eventBatchInput(100), value));
      }),
      { numRuns: 500 },
    );
  });

  it('takes any JSON value as a JsonValue without walking it: a parser has already read it as JSON', () => {
    const deep = JSON.parse(`${'['.repeat(500)}1${']'.repeat(500)}`) as unknown;
    for (const value of [null, 0, 'x', [1, { a: [] }], { k: { '': null } }, deep]) expect(JsonValue.parse(value)).toBe(value);
  });
});
