// A cheap fingerprint of every table the API writes, in one query, so a test can take one after
// each of thousands of requests: equal fingerprints mean the request wrote nothing.
//
// Rows are identified by their physical version (`xmin`, `ctid`) rather than their content: any
// INSERT, UPDATE (even to the same values) or DELETE changes the set, a rolled-back write leaves it
// as it was, and nothing has to read (and detoast) large JSON values. `credentials` is the
// exception: authenticating may record `last_used_time`, so its rows are compared by content
// without that column.
import { sql } from 'kysely';
import type { Database } from '../../src/db/connect.js';

/** Every table of migrations/. */
export const WRITTEN_TABLES = ['accounts', 'principals', 'credentials', 'policies', 'session_spaces', 'space_users', 'sessions', 'session_catalog', 'events', 'state_checkpoints'] as const;

export type TableFingerprints = Record<string, { rows: number; md5: string }>;

const rowVersion = (table: string) =>
  table === 'credentials' ? `(to_jsonb(${table}) - 'last_used_time')::text` : `${table}.xmin::text || '@' || ${table}.ctid::text`;

const FINGERPRINT_QUERY = WRITTEN_TABLES.map(
  (table) =>
    `SELECT '${table}' AS name, count(*)::int AS rows, md5(coalesce(string_agg(${rowVersion(table)}, ',' ORDER BY ${rowVersion(table)}), '')) AS md5 FROM ${table}`,
).join('\nUNION ALL\n');

export async function tableFingerprints(db: Database): Promise<TableFingerprints> {
  const result = await sql<{ name: string; rows: number; md5: string }>`${sql.raw(FINGERPRINT_QUERY)}`.execute(db);
  return Object.fromEntries(result.rows.map((row) => [row.name, { rows: row.rows, md5: row.md5 }]));
}

/** Names of the tables whose fingerprint differs, e.g. `["sessions"]`. */
export function changedTables(before: TableFingerprints, after: TableFingerprints): string[] {
  return WRITTEN_TABLES.filter((table) => before[table]?.md5 !== after[table]?.md5 || before[table]?.rows !== after[table]?.rows);
}
