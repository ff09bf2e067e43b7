// The append's answer: the session after the append, with its user's and space's state, and the
// sizes the state limit measured. Written once here for TypeScript; the SQL side is the OUT
// columns of append_events() and append_events_batch() (migrations 0004, 0007, 0008, frozen), and
// test/integration/append-answer-columns.test.ts checks the two sides agree, name for name, in order.
//
// The three states are selected as JSON text (`state::text`), which costs PostgreSQL nothing more
// than sending jsonb does: the service passes a session's state on to the answer as it is, instead
// of parsing up to a megabyte and writing it out again (append.service.ts, mergedStateText).
import type { JsonValue } from '../../db/schema.js';

export interface AppendedSession {
  title: string;
  metadata: Record<string, string>;
  /** The session's own state after the append, as JSON text. */
  state: string;
  memo: JsonValue | null;
  window_start_seq: number;
  event_count: number;
  revision: number;
  create_time: Date;
  update_time: Date;
  expire_time: Date | null;
  /** The user's and the space's states, as JSON text. */
  user_state: string;
  app_state: string;
  session_bytes: number | null;
  user_bytes: number | null;
  app_bytes: number | null;
}

/** The answer's columns in the functions' order: what a statement selects from them. */
export const APPEND_ANSWER_COLUMNS = [
  'title',
  'metadata',
  'state',
  'memo',
  'window_start_seq',
  'event_count',
  'revision',
  'create_time',
  'update_time',
  'expire_time',
  'user_state',
  'app_state',
  'session_bytes',
  'user_bytes',
  'app_bytes',
] as const satisfies readonly (keyof AppendedSession)[];

const TEXT_COLUMNS = new Set<string>(['state', 'user_state', 'app_state']);

/** The select list of a statement over the functions: the columns in order, the states as text. */
export const APPEND_ANSWER_SELECT = APPEND_ANSWER_COLUMNS.map((column) => (TEXT_COLUMNS.has(column) ? `${column}::text AS ${column}` : column)).join(', ');

// A function called with p_state_limit NULL (migrations/0021) leaves the state limit to its
// statement: each state is written out as text once, by the lateral subquery below (OFFSET 0 keeps
// the planner from copying its expressions into each use), and its size is measured on that text.
const MEASURED_BYTES: Partial<Record<(typeof APPEND_ANSWER_COLUMNS)[number], { text: string; scope: string }>> = {
  session_bytes: { text: 'state', scope: 'session' },
  user_bytes: { text: 'user_state', scope: 'user' },
  app_bytes: { text: 'app_state', scope: 'app' },
};

/** What follows the function's call, `… AS a`, in a statement over it called with p_state_limit NULL. */
export const STATES_AS_TEXT_ONCE = `CROSS JOIN LATERAL (SELECT ${[...TEXT_COLUMNS].map((column) => `a.${column}::text AS ${column}`).join(', ')} OFFSET 0) AS t`;

/**
 * The select list over such a call: the columns in order, the states as text, the sizes measured
 * against `limit` (a parameter) by state_text_within_limit(), which raises AS413 past it.
 */
export const measuredAnswerSelect = (limit: string): string =>
  APPEND_ANSWER_COLUMNS.map((column) => {
    const measured = MEASURED_BYTES[column];
    // Most appends change one state or none: the others skip the function call.
    if (measured) return `CASE WHEN a.${column} IS NOT NULL THEN state_text_within_limit(t.${measured.text}, a.${column}, '${measured.scope}', ${limit}) END AS ${column}`;
    return TEXT_COLUMNS.has(column) ? `t.${column}` : `a.${column}`;
  }).join(', ');

// Every field of AppendedSession is a column above (the `satisfies` checks the converse).
type MissingColumns = Exclude<keyof AppendedSession, (typeof APPEND_ANSWER_COLUMNS)[number]>;
const everyFieldIsAColumn: MissingColumns extends never ? true : MissingColumns = true;
void everyFieldIsAColumn;
