// The session as the API shows it, as SQL text that PostgreSQL turns into JSON: shared by the
// sessions module's describe read (session-json.repository.ts) and lists (sessions.repository.ts)
// and the context read (context.repository.ts), which extends it with the newest events. Text, not
// a query: the repositories prepare and run it.
import type { SessionKey } from './keys.js';
import { sessionNotExpiredText } from './sql-fragments.js';

/** A timestamptz as toISOString writes it: UTC, milliseconds, `Z` (PostgreSQL's MS truncates, as pg's Date does). */
export const isoTimestamp = (column: string): string => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * mergedStateView (src/modules/state/scoped-state.ts) in SQL: the session's own keys, the user's
 * `user:*` and the space's `app:*` keys, each scope contributing only keys of its own prefix (so a
 * stray key stored in the wrong place neither shadows nor leaks). The parts are disjoint by prefix,
 * so the order of `||` does not matter. `session` is the sessions row's alias; `userState` and
 * `appState` the expressions of its user's and its space's state.
 */
const mergedState = ({ session, userState, appState }: SharedStateColumns) => `(
  (${session}.state - ARRAY(SELECT k FROM jsonb_object_keys(${session}.state) AS k WHERE k ^@ 'user:' OR k ^@ 'app:' OR k ^@ 'temp:'))
  || (${userState} - ARRAY(SELECT k FROM jsonb_object_keys(${userState}) AS k WHERE NOT k ^@ 'user:'))
  || (${appState} - ARRAY(SELECT k FROM jsonb_object_keys(${appState}) AS k WHERE NOT k ^@ 'app:'))
)`;

/** Where a session's row and the two states shared with it are found in a query. */
export interface SharedStateColumns {
  session: string;
  userState: string;
  appState: string;
}

/**
 * The Session view as text (cast: pg would parse a json column), over a sessions row and its shared
 * states (the describe and context reads join them; a session list's page carries them as columns).
 * Every field is always present.
 */
export const sessionJson = (columns: SharedStateColumns): string => {
  const s = columns.session;
  return `json_build_object(
  'spaceId', ${s}.space_id, 'userId', ${s}.user_id, 'sessionId', ${s}.session_id, 'title', ${s}.title,
  'metadata', ${s}.metadata, 'state', ${mergedState(columns)}, 'memo', ${s}.memo,
  'windowStartSeq', ${s}.window_start_seq, 'eventCount', ${s}.event_count, 'revision', ${s}.revision,
  'createTime', ${isoTimestamp(`${s}.create_time`)}, 'updateTime', ${isoTimestamp(`${s}.update_time`)},
  'expireTime', ${isoTimestamp(`${s}.expire_time`)}
)::text`;
};

const SESSION_JSON = sessionJson({ session: 's', userState: 'u.state', appState: 'a.state' });

/**
 * The live session $1–$4 (account, space, user, session) joined to its user's and its space's rows,
 * which exist while the session does (foreign keys). Aliases: s, u, a.
 */
const LIVE_SESSION_FROM = `sessions AS s
  JOIN space_users AS u ON u.account_id = s.account_id AND u.space_id = s.space_id AND u.user_id = s.user_id
  JOIN session_spaces AS a ON a.account_id = s.account_id AND a.space_id = s.space_id
  WHERE s.account_id = $1 AND s.space_id = $2 AND s.user_id = $3 AND s.session_id = $4
    AND ${sessionNotExpiredText('s')}`;

/**
 * The live session's read: its JSON, the memo's, and what the route needs besides (the revision
 * for the ETag, the window bounds), plus `more` select items over `s` (the context read's events).
 */
export const liveSessionQuery = (more?: string): string => `SELECT s.revision, s.window_start_seq, s.event_count, s.memo::text AS memo_json,
  ${SESSION_JSON} AS session_json${more ? `,\n  ${more}` : ''}
  FROM ${LIVE_SESSION_FROM}`;

export const sessionKeyParameters = (key: SessionKey): unknown[] => [key.accountId, key.spaceId, key.userId, key.sessionId];
