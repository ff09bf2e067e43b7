// Checks a schema against a Citus layout (docs/scale-out.md) by reading the catalog: what Citus
// would refuse when the tables are distributed, found on plain PostgreSQL (or PGlite) first.
//
// Citus enforces a primary key, unique constraint, unique index or exclusion constraint only within
// one shard, so on a distributed table each must include the distribution column; a foreign key
// between distributed tables must join on the distribution column (the rows are then on one
// shard); a distributed table may reference a reference table; a reference table (a copy on every
// node) may not reference a distributed one. Colocated tables need the same column type.
import { readFileSync } from 'node:fs';
import { sql, type Kysely } from 'kysely';

export interface CitusLayout {
  distributionColumn: string;
  distributed: string[];
  reference: string[];
  /** Tables that stay local to the coordinator (the migrator's bookkeeping). */
  local: string[];
}

/** The layout a distribution script applies: its create_distributed_table and create_reference_table calls. */
export function readCitusLayout(file: string, local: string[]): CitusLayout {
  const text = readFileSync(file, 'utf8').replace(/--.*$/gm, '');
  // A table that an older schema may not have yet is named through to_regclass().
  const distributed = [...text.matchAll(/create_distributed_table\(\s*(?:to_regclass\()?'([^']+)'\)?\s*,\s*'([^']+)'/g)];
  const columns = new Set(distributed.map((call) => call[2]!));
  if (columns.size !== 1) throw new Error(`expected one distribution column, found ${[...columns].join(', ') || 'none'}`);
  return {
    distributionColumn: [...columns][0]!,
    distributed: distributed.map((call) => call[1]!),
    reference: [...text.matchAll(/create_reference_table\(\s*'([^']+)'/g)].map((call) => call[1]!),
    local,
  };
}

interface ConstraintRow {
  name: string;
  kind: 'p' | 'u' | 'f' | 'x';
  table: string;
  columns: string[];
  target: string | null;
  target_columns: string[] | null;
}

/** Every way `schema` breaks `layout`, one sentence each; empty when Citus would accept it. */
export async function citusLayoutViolations(db: Kysely<unknown>, schema: string, layout: CitusLayout): Promise<string[]> {
  const column = layout.distributionColumn;
  const distributed = new Set(layout.distributed);
  const reference = new Set(layout.reference);
  const violations: string[] = [];

  const tables = (
    await sql<{ name: string; column_type: string | null }>`
      SELECT c.relname AS name, format_type(a.atttypid, a.atttypmod) AS column_type
      FROM pg_class c
      LEFT JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = ${column} AND NOT a.attisdropped
      WHERE c.relnamespace = ${schema}::regnamespace AND c.relkind IN ('r', 'p')
      ORDER BY c.relname`.execute(db)
  ).rows;
  for (const name of [...distributed, ...reference]) {
    if (!tables.some((table) => table.name === name)) violations.push(`${name}: in the layout but not in the schema`);
  }
  const types = new Set<string>();
  for (const table of tables) {
    if (distributed.has(table.name)) {
      if (table.column_type === null) violations.push(`${table.name}: distributed but has no column ${column}`);
      else types.add(table.column_type);
    } else if (!reference.has(table.name) && !layout.local.includes(table.name)) {
      violations.push(`${table.name}: neither distributed nor a reference table (add it to the layout)`);
    }
  }
  if (types.size > 1) violations.push(`${column}: colocated tables need one type, found ${[...types].sort().join(', ')}`);

  const constraints = (
    await sql<ConstraintRow>`
      SELECT con.conname AS name, con.contype AS kind, rel.relname AS table,
        ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY AS k(attnum, i)
              JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum ORDER BY k.i) AS columns,
        target.relname AS target,
        CASE WHEN con.confkey IS NULL THEN NULL ELSE
          ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY AS k(attnum, i)
                JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.attnum ORDER BY k.i) END AS target_columns
      FROM pg_constraint con
      JOIN pg_class rel ON rel.oid = con.conrelid
      LEFT JOIN pg_class target ON target.oid = con.confrelid
      WHERE rel.relnamespace = ${schema}::regnamespace AND con.contype IN ('p', 'u', 'f', 'x')
      ORDER BY rel.relname, con.conname`.execute(db)
  ).rows;
  const kinds = { p: 'primary key', u: 'unique constraint', x: 'exclusion constraint', f: 'foreign key' } as const;
  for (const c of constraints) {
    const what = `${c.table}: ${kinds[c.kind]} ${c.name} (${c.columns.join(', ')})`;
    if (distributed.has(c.table)) {
      if (c.kind !== 'f') {
        if (!c.columns.includes(column)) violations.push(`${what} does not include ${column}`);
        continue;
      }
      if (distributed.has(c.target!)) {
        const position = c.columns.indexOf(column);
        if (position < 0 || c.target_columns![position] !== column) violations.push(`${what} → ${c.target} does not join ${column} to ${column}`);
      } else if (!reference.has(c.target!)) {
        violations.push(`${what} → ${c.target}: a distributed table may reference only distributed or reference tables`);
      }
    } else if (reference.has(c.table) && c.kind === 'f' && !reference.has(c.target!)) {
      violations.push(`${what} → ${c.target}: a reference table may reference only reference tables`);
    }
  }

  // Unique indexes that no constraint owns (CREATE UNIQUE INDEX, partial ones included).
  const indexes = (
    await sql<{ name: string; table: string; columns: string[] }>`
      SELECT ic.relname AS name, rel.relname AS table,
        ARRAY(SELECT a.attname::text FROM unnest(i.indkey::int2[]) AS k(attnum)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum) AS columns
      FROM pg_index i
      JOIN pg_class ic ON ic.oid = i.indexrelid
      JOIN pg_class rel ON rel.oid = i.indrelid
      WHERE rel.relnamespace = ${schema}::regnamespace AND i.indisunique
        AND NOT EXISTS (SELECT 1 FROM pg_constraint con WHERE con.conindid = i.indexrelid)
      ORDER BY rel.relname, ic.relname`.execute(db)
  ).rows;
  for (const index of indexes) {
    if (distributed.has(index.table) && !index.columns.includes(column)) {
      violations.push(`${index.table}: unique index ${index.name} (${index.columns.join(', ')}) does not include ${column}`);
    }
  }
  return violations;
}
