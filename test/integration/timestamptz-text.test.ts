// The service reads timestamptz values with its own reader of their common text form
// (src/db/timestamp-text.ts): what PostgreSQL and PGlite write, in any time zone a connection may be
// set to, must be that form, and must be read as the instant the database means, to the millisecond.
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { timestamptzFromText } from '../../src/db/timestamp-text.js';
import { type TestApp, createTestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

const ZONES = ['UTC', 'Asia/Shanghai', 'America/St_Johns', 'Asia/Kathmandu', 'Pacific/Chatham', 'America/Sao_Paulo'];
const VALUES = [sql`now()`, sql`'2026-12-07 17:32:30.029999+00'::timestamptz`, sql`'2026-01-01 00:00:00+00'::timestamptz`, sql`'1999-12-31 23:59:59.5-03:30'::timestamptz`];

it('reads every value as the instant the database means, in the common form, in any time zone', async () => {
  for (const zone of ZONES) {
    await t.db.transaction().execute(async (trx) => {
      await sql`SELECT set_config('TimeZone', ${zone}, true)`.execute(trx);
      for (const value of VALUES) {
        const { rows } = await sql<{ text: string; read: Date; ms: string }>`
          SELECT ${value}::text AS text, ${value} AS read, floor(extract(epoch FROM ${value}) * 1000)::text AS ms`.execute(trx);
        const row = rows[0]!;
        const fast = timestamptzFromText(row.text, (text) => {
          throw new Error(`not in the common form: ${text} (${zone})`);
        });
        expect(fast).toEqual(row.read);
        expect(row.read.getTime()).toBe(Number(row.ms));
      }
    });
  }
});
