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
// The pool (guarded-pool.ts) sends the registered texts as named statements.
const namesByText = new Map<string, string>();

/** Registers `text` under `name` and returns it, for a repository's statement constant. */
export function preparedStatement(name: string, text: string): string {
  for (const [known, knownName] of namesByText) {
    if (knownName === name && known !== text) throw new Error(`prepared statement "${name}" is registered with another text`);
  }
  namesByText.set(text, name);
  return text;
}

/** The name `text` is registered under, or undefined for a statement sent unnamed. */
export const registeredStatementName = (text: string): string | undefined => namesByText.get(text);
