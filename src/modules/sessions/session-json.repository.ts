// The session as the API shows it (the Session schema of session.model.ts), written as JSON text by
// PostgreSQL: the per-turn reads (describe, context) send that text as it is, instead of parsing
// the row's jsonb in Node, building the view and serializing it again.
//
// The SQL text lives in src/db/session-json-sql.ts. Raw SQL, for two reasons: the text is precompiled once (building and compiling the query with
// Kysely on every request cost more than the database did), and the context read extends it with
// a UNION that Kysely would not make clearer. Every statement here is read by primary key:
// sessions_pkey, space_users_pkey, session_spaces_pkey (migrations/0001_core.sql).
import { CompiledQuery } from 'kysely';
import type { Executor } from '../../db/connect.js';
import { liveSessionQuery, sessionKeyParameters } from '../../db/session-json-sql.js';
import { preparedStatement } from '../../db/prepared-statements.js';
import type { SessionKey } from '../../db/keys.js';
import type { SessionJsonRow } from './session.model.js';

const FIND_SESSION_JSON = preparedStatement('describe_session', liveSessionQuery());

/** The live session as the API's JSON, in one statement; undefined when it is missing or expired. */
export async function findSessionJson(db: Executor, key: SessionKey): Promise<SessionJsonRow | undefined> {
  const result = await db.executeQuery<SessionJsonRow>(CompiledQuery.raw(FIND_SESSION_JSON, sessionKeyParameters(key)));
  return result.rows[0];
}
