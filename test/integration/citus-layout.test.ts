// The schema stays Citus-ready as it changes: the live schema (every migration applied) is checked
// against the layout deploy/citus/distribute.sql applies, by reading pg_constraint and pg_index.
// The checker is also run on a deliberately bad schema, to show each rule can fail.
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type CitusLayout, citusLayoutViolations, readCitusLayout } from '../support/citus-layout.js';
import { createTestDatabase, type TestDatabase } from '../support/test-database.js';

const DISTRIBUTE_SQL = fileURLToPath(new URL('../../deploy/citus/distribute.sql', import.meta.url));
const MIGRATOR_TABLES = ['kysely_migration', 'kysely_migration_lock'];

let database: TestDatabase;
let db: Kysely<unknown>;
beforeAll(async () => {
  database = await createTestDatabase({ poolMax: 2 });
  db = database.db as unknown as Kysely<unknown>;
});
afterAll(async () => {
  await database?.dispose();
});

describe('Citus layout', () => {
  it('classifies every table the migrations create exactly once, and distributes only tables that carry account_id', async () => {
    // Checked against the live schema, not a copy of the script: a migration that adds a table
    // without a place in distribute.sql fails here.
    const layout = readCitusLayout(DISTRIBUTE_SQL, MIGRATOR_TABLES);
    expect(layout.distributionColumn).toBe('account_id');
    const classified = [...layout.distributed, ...layout.reference, ...layout.local];
    expect(new Set(classified).size, 'a table in two classes').toBe(classified.length);
    const tables = await sql<{ name: string }>`
      SELECT table_name AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY 1`.execute(db);
    expect([...classified].sort()).toEqual(tables.rows.map((row) => row.name));
    const withColumn = await sql<{ name: string }>`
      SELECT table_name AS name FROM information_schema.columns WHERE table_schema = 'public' AND column_name = ${layout.distributionColumn}`.execute(db);
    const carriers = new Set(withColumn.rows.map((row) => row.name));
    expect(layout.distributed.filter((table) => !carriers.has(table))).toEqual([]);
  });

  it('the migrated schema satisfies it: every key, unique index and foreign key of a distributed table has account_id', async () => {
    expect(await citusLayoutViolations(db, 'public', readCitusLayout(DISTRIBUTE_SQL, MIGRATOR_TABLES))).toEqual([]);
  });

  it('fails on a schema that breaks each rule', async () => {
    const schema = `citus_bad_${randomBytes(4).toString('hex')}`;
    const layout: CitusLayout = { distributionColumn: 'account_id', distributed: ['spaces', 'items', 'bookings', 'orphans'], reference: ['accounts', 'plans'], local: [] };
    await sql
      .raw(
        `CREATE SCHEMA ${schema};
        SET LOCAL search_path = ${schema};
        CREATE TABLE accounts (account_id text PRIMARY KEY);
        -- The primary key lacks account_id; the unique constraint is fine.
        CREATE TABLE spaces (account_id text NOT NULL REFERENCES accounts, space_id text PRIMARY KEY, name text, UNIQUE (account_id, name));
        -- A foreign key to a distributed table without account_id; a unique index without it.
        CREATE TABLE items (account_id text NOT NULL, item_id text, space_id text REFERENCES spaces (space_id), PRIMARY KEY (account_id, item_id));
        CREATE UNIQUE INDEX items_one_per_space ON items (space_id) WHERE item_id IS NOT NULL;
        -- An exclusion constraint without account_id; account_id of another type than the others.
        CREATE TABLE bookings (account_id varchar(64) NOT NULL, during tstzrange, EXCLUDE USING gist (during WITH &&));
        -- Distributed, but no account_id at all.
        CREATE TABLE orphans (orphan_id text PRIMARY KEY);
        -- A reference table that references a distributed one.
        CREATE TABLE plans (plan_id text PRIMARY KEY, space_id text REFERENCES spaces (space_id));
        -- In no list.
        CREATE TABLE stray (x integer);`,
      )
      .execute(db)
      .catch(async (error: unknown) => {
        await sql.raw(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).execute(db);
        throw error;
      });
    try {
      expect((await citusLayoutViolations(db, schema, layout)).sort()).toEqual(
        [
          'account_id: colocated tables need one type, found character varying(64), text',
          'bookings: exclusion constraint bookings_during_excl (during) does not include account_id',
          'items: foreign key items_space_id_fkey (space_id) → spaces does not join account_id to account_id',
          'items: unique index items_one_per_space (space_id) does not include account_id',
          'orphans: distributed but has no column account_id',
          'orphans: primary key orphans_pkey (orphan_id) does not include account_id',
          'plans: foreign key plans_space_id_fkey (space_id) → spaces: a reference table may reference only reference tables',
          'spaces: primary key spaces_pkey (space_id) does not include account_id',
          'stray: neither distributed nor a reference table (add it to the layout)',
        ].sort(),
      );
      // A table the layout names but the schema lacks is reported too.
      expect(await citusLayoutViolations(db, schema, { ...layout, reference: [...layout.reference, 'missing'] })).toContain('missing: in the layout but not in the schema');
    } finally {
      await sql.raw(`DROP SCHEMA ${schema} CASCADE`).execute(db);
    }
  });
});
