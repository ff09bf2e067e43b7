// What a repository function really sends to PostgreSQL, and how PostgreSQL plans it: tests that
// guard an index choice (read-plans, offset-paging, state-at-checkpoints) run the function through a
// Kysely that records its statement, then EXPLAIN that statement with its parameters.
import { type CompiledQuery, Kysely, PostgresDialect } from 'kysely';
import { expect } from 'vitest';
import type { DB } from '../../src/db/schema.js';
import type { TestDatabase } from './test-database.js';

type Pool = TestDatabase['pool'];

export interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  /** Present with EXPLAIN (VERBOSE). */
  Output?: string[];
  Plans?: PlanNode[];
}

/** Runs `work` through a Kysely over `pool` that records what it sends; it must send one statement. */
export async function recordOneStatement<T>(pool: Pool, work: (db: Kysely<DB>) => Promise<T>): Promise<{ result: T; statement: CompiledQuery }> {
  const statements: CompiledQuery[] = [];
  const recorder = new Kysely<DB>({ dialect: new PostgresDialect({ pool }), log: (event) => void (event.level === 'query' && statements.push(event.query)) });
  const result = await work(recorder);
  expect(statements).toHaveLength(1);
  return { result, statement: statements[0]! };
}

/** The root of `statement`'s plan, with its own parameters; `verbose` adds each node's Output. */
export async function planOf(pool: Pool, statement: CompiledQuery, { verbose = false } = {}): Promise<PlanNode> {
  const result = await pool.query(`EXPLAIN (${verbose ? 'VERBOSE, ' : ''}FORMAT JSON) ${statement.sql}`, statement.parameters as unknown[]);
  return (result.rows[0]['QUERY PLAN'] as [{ Plan: PlanNode }])[0].Plan;
}

/** `node` and every node under it. */
export const planNodes = (node: PlanNode): PlanNode[] => [node, ...(node.Plans ?? []).flatMap(planNodes)];
