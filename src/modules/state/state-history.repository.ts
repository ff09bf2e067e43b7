// "State at event N" (issue 13): the session-scoped state replayed inside PostgreSQL, from the state
// the session was created with through the stateDelta of each event before a seq, in seq order, by
// the same apply_state_deltas() the append uses (migrations/0004). Only the deltas travel from the
// events' rows to the function, never to the service: a long history costs one statement.
import { sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import type { JsonObject } from '../../db/schema.js';
import { sessionNotExpiredText } from '../../db/sql-fragments.js';

export interface ReplayedState {
  /** The session-scoped state after every event with a seq below `beforeSeq`. */
  state: JsonObject;
  /** false when the session's initial state is not stored (then the replay starts from {}). */
  initialStateKnown: boolean;
}

/**
 * Reads the events through the primary key (account_id, space_id, user_id, session_id, seq), a range
 * scan of the events before `beforeSeq`. The `user:` and `app:` keys of each delta are left out:
 * those states are shared with other sessions, whose events this replay does not see. Undefined
 * when the session is missing or expired.
 */
export async function replaySessionState(db: Executor, key: SessionKey, beforeSeq: number): Promise<ReplayedState | undefined> {
  const result = await sql<{ state: JsonObject; initial_state_known: boolean }>`
    SELECT s.initial_state IS NOT NULL AS initial_state_known,
           apply_state_deltas(
             COALESCE(s.initial_state, '{}'::jsonb),
             COALESCE((
               SELECT jsonb_agg(jsonb_build_object(
                        'mode', e.actions -> 'stateDeltaMode',
                        'delta', (SELECT COALESCE(jsonb_object_agg(d.key, d.value), '{}'::jsonb)
                                  FROM jsonb_each(e.actions -> 'stateDelta') AS d
                                  WHERE d.key NOT LIKE 'user:%' AND d.key NOT LIKE 'app:%' AND d.key NOT LIKE 'temp:%'))
                      ORDER BY e.seq)
               FROM events AS e
               WHERE e.account_id = s.account_id AND e.space_id = s.space_id AND e.user_id = s.user_id AND e.session_id = s.session_id
                 AND e.seq < ${beforeSeq} AND jsonb_typeof(e.actions -> 'stateDelta') = 'object'
             ), '[]'::jsonb)
           ) AS state
    FROM sessions AS s
    WHERE s.account_id = ${key.accountId} AND s.space_id = ${key.spaceId} AND s.user_id = ${key.userId} AND s.session_id = ${key.sessionId}
      AND ${sql.raw(sessionNotExpiredText('s'))}
  `.execute(db);
  const row = result.rows[0];
  return row && { state: row.state, initialStateKnown: row.initial_state_known };
}
