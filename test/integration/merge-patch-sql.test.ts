// The database side of the append (migrations/0004_append_in_database.sql): its RFC 7396 merge
// against the RFC's examples and against the TypeScript merge on random values, the replace mode,
// and the state size the database measures against stateBytes, which every other check uses.
import fc from 'fast-check';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { JsonValue } from '../../src/db/schema.js';
import { stateBytes } from '../../src/lib/json-measure.js';
import { applyMergePatch } from '../../src/modules/state/merge-patch.js';
import { applyStateDelta } from '../../src/modules/state/state-delta.js';
import { APPENDIX_A } from '../support/merge-patch-cases.js';
import { type TestDatabase, createTestDatabase } from '../support/test-database.js';

let database: TestDatabase;
beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 2 });
});
afterAll(async () => {
  await database.dispose();
});

const RUNS = Number(process.env.PROPERTY_RUNS ?? 200);

async function mergeInDatabase(target: JsonValue, patch: JsonValue): Promise<JsonValue> {
  const { rows } = await sql<{ merged: JsonValue }>`SELECT jsonb_merge_patch(${JSON.stringify(target)}::jsonb, ${JSON.stringify(patch)}::jsonb) AS merged`.execute(database.db);
  return rows[0]!.merged;
}

// Values JSON carries exactly both ways: finite doubles, keys and strings without NUL (jsonb refuses \u0000).
const key = fc.oneof(fc.constantFrom('a', 'b', 'c', 'user:x', 'é', ''), fc.string({ maxLength: 6 })).filter((k) => !k.includes('\u0000'));
const text = fc.string({ maxLength: 12, unit: 'grapheme' }).filter((s) => !s.includes('\u0000'));
const json: fc.Arbitrary<JsonValue> = fc.letrec<{ value: JsonValue }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constant(null),
    fc.boolean(),
    fc.integer({ min: -1e6, max: 1e6 }),
    fc.double({ noNaN: true, noDefaultInfinity: true }).map((n) => (Object.is(n, -0) ? 0 : n)),
    text,
    fc.array(tie('value'), { maxLength: 4 }),
    fc.dictionary(key, tie('value'), { maxKeys: 4 }),
  ),
})).value;
const object = fc.dictionary(key, json, { maxKeys: 5 });

describe('jsonb_merge_patch (RFC 7396 in PostgreSQL)', () => {
  it.each(APPENDIX_A.map(([original, patch, result], index) => ({ n: index + 1, original, patch, result })))(
    'Appendix A example $n',
    async ({ original, patch, result }) => {
      expect(await mergeInDatabase(original, patch)).toEqual(result);
    },
  );

  it('equals the TypeScript applyMergePatch on random targets and patches', async () => {
    await fc.assert(
      fc.asyncProperty(fc.oneof(object, json), fc.oneof({ weight: 3, arbitrary: object }, { weight: 1, arbitrary: json }), async (target, patch) => {
        expect(await mergeInDatabase(target, patch)).toEqual(applyMergePatch(target, patch));
      }),
      { numRuns: RUNS },
    );
  });
});

describe('apply_state_deltas', () => {
  it('folds the deltas in order, each with its mode, as applyStateDelta does', async () => {
    await fc.assert(
      fc.asyncProperty(object, fc.array(fc.record({ delta: object, mode: fc.constantFrom('merge-patch', 'replace') as fc.Arbitrary<'merge-patch' | 'replace'> }), { maxLength: 4 }), async (state, steps) => {
        const { rows } = await sql<{ state: JsonValue }>`SELECT apply_state_deltas(${JSON.stringify(state)}::jsonb, ${JSON.stringify(steps)}::jsonb) AS state`.execute(database.db);
        const expected = steps.reduce((current, step) => applyStateDelta(current, step.delta, step.mode), state);
        expect(rows[0]!.state).toEqual(expected);
      }),
      { numRuns: RUNS },
    );
  });
});

describe('state size', () => {
  it('stateBytes counts exactly what octet_length(state::text) counts in the database', async () => {
    const numbers = fc.constantFrom(1e21, -1.5e21, 1.5e-7, -2.25e-9, 1e300, 5e-324, 0.1, 123456789012345680000);
    const withNumbers = fc.dictionary(key, fc.oneof(json, numbers), { maxKeys: 6 });
    await fc.assert(
      fc.asyncProperty(withNumbers, async (state) => {
        const { rows } = await sql<{ bytes: number }>`SELECT octet_length(${JSON.stringify(state)}::jsonb::text) AS bytes`.execute(database.db);
        expect(stateBytes(state)).toBe(rows[0]!.bytes);
      }),
      { numRuns: RUNS },
    );
  });
});
