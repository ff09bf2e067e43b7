// Named (prepared) statements for the per-turn reads.
//
// PostgreSQL parses and plans an unnamed statement on every execution. For the one-statement reads
// that build their answer's JSON (describe, context) planning costs more than executing: measured
// through pg on 50 events, 0.68 ms a read unnamed and 0.27 ms named, where the two plain
// primary-key queries of the same rows take 0.51 ms. A statement text registered here goes out as
// a named statement instead: each connection parses and plans it once, then only binds and runs it.
//
// That needs a connection whose prepared statements outlive one query of this client, which
// PostgreSQL, PGlite (one connection) and PgBouncer 1.21+ in transaction mode with
// max_prepared_statements > 0 (it prepares them on whichever server connection it hands out) all
// give. Behind a pooler that cannot, DB_PREPARED_STATEMENTS=false sends every statement unnamed.
import type { PostgresPool, PostgresPoolClient } from 'kysely';
import type pg from 'pg';

const namesByText = new Map<string, string>();

/** Registers `text` under `name` and returns it, for a repository's statement constant. */
export function preparedStatement(name: string, text: string): string {
  for (const [known, knownName] of namesByText) {
    if (knownName === name && known !== text) throw new Error(`prepared statement "${name}" is registered with another text`);
  }
  namesByText.set(text, name);
  return text;
}

/**
 * The pool as Kysely's PostgresDialect sees it, sending the registered texts as named statements.
 * Everything else (other statements, cursors) goes to pg unchanged.
 */
export function withPreparedStatements(pool: pg.Pool): PostgresPool {
  // One wrapper per pg client: Kysely keeps its connection objects by client identity.
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    const query = (first: unknown, parameters?: readonly unknown[]) => {
      const name = typeof first === 'string' ? namesByText.get(first) : undefined;
      if (name !== undefined) return client.query({ name, text: first as string, values: parameters as unknown[] });
      return (client.query as (...args: unknown[]) => unknown)(first, ...(parameters === undefined ? [] : [parameters]));
    };
    return { query: query as PostgresPoolClient['query'], release: (destroy?: boolean) => client.release(destroy) };
  };
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) wrappers.set(client, (wrapper = wrap(client)));
      return wrapper;
    },
    end: () => pool.end(),
  };
}
