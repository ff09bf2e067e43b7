// The append answer's columns are written once in TypeScript (src/modules/events/append-answer.ts)
// and once per function in the frozen migrations (the OUT columns of append_events() and
// append_events_batch(), append_events_batch_whole()). This test ties the two: same names, same order.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { APPEND_ANSWER_COLUMNS } from '../../src/modules/events/append-answer.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

let database: TestDatabase;

beforeAll(async () => {
  database = await createTestDatabase();
});

afterAll(async () => {
  await database.dispose();
});

async function outColumns(name: string): Promise<string[]> {
  const { rows } = await sql<{ names: string[]; modes: string[] }>`
    SELECT proargnames AS names, proargmodes::text[] AS modes FROM pg_proc WHERE proname = ${name}`.execute(database.db);
  expect(rows).toHaveLength(1);
  const [{ names, modes }] = rows as [{ names: string[]; modes: string[] }];
  return names.filter((_, i) => modes[i] === 'o' || modes[i] === 't');
}

it('append_events() answers the columns of APPEND_ANSWER_COLUMNS, in order', async () => {
  expect(await outColumns('append_events')).toEqual([...APPEND_ANSWER_COLUMNS]);
});

it('append_events_batch() answers the ordinal, then the same columns', async () => {
  expect(await outColumns('append_events_batch')).toEqual(['ordinal', ...APPEND_ANSWER_COLUMNS]);
});

it('append_events_batch_whole() answers as append_events_batch() does', async () => {
  expect(await outColumns('append_events_batch_whole')).toEqual(['ordinal', ...APPEND_ANSWER_COLUMNS]);
});
