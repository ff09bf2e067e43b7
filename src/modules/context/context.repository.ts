// Queries of the context module. Every query is scoped by the full session key, account first.
import { type Transaction, sql } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB, EventRow } from '../../db/schema.js';
import { type SessionKey, type SessionWithSharedState, liveSessionWithSharedState } from '../sessions/sessions.repository.js';

export type { SessionKey };

/** An event of the combined read: the columns a view needs, its timestamps as JSON gives them (ISO 8601 strings). */
export type EventJson = Omit<EventRow, 'account_id' | 'space_id' | 'user_id' | 'session_id' | 'payload_hash' | 'event_time' | 'create_time'> & {
  event_time: string;
  create_time: string;
};

/**
 * The live session with its user's and space's state and its newest `limit` events from
 * windowStartSeq to eventCount (newest first), in one statement: a single statement reads one
 * snapshot, so this needs no transaction (two round trips fewer than BEGIN … COMMIT). The events
 * come as one JSON array (json_agg writes text: several times cheaper for PostgreSQL than building
 * jsonb) from the backward primary-key scan of the subquery, which reads `limit` rows however long
 * the history is.
 */
export async function findSessionWithNewestEvents(
  db: Database,
  key: SessionKey,
  limit: number,
): Promise<(SessionWithSharedState & { newest_events: EventJson[] }) | undefined> {
  return liveSessionWithSharedState(db, key)
    .select(
      sql<EventJson[]>`(
        SELECT coalesce(json_agg(newest ORDER BY newest.seq DESC), '[]'::json)
        FROM (
          SELECT seq, event_id, invocation_id, author, content, actions, metadata, extensions, error_code, error_message, event_time, create_time
          FROM events
          WHERE events.account_id = sessions.account_id AND events.space_id = sessions.space_id
            AND events.user_id = sessions.user_id AND events.session_id = sessions.session_id
            AND events.seq >= sessions.window_start_seq AND events.seq <= sessions.event_count
          ORDER BY events.seq DESC
          LIMIT ${limit}
        ) AS newest
      )`.as('newest_events'),
    )
    .executeTakeFirst();
}

/**
 * The newest events with seq in [fromSeq, beforeSeq), newest first. The primary key is
 * (account, space, user, session, seq): this is a backward index range scan that reads `limit`
 * rows however long the history is.
 */
export async function listNewestEvents(trx: Transaction<DB>, key: SessionKey, range: { fromSeq: number; beforeSeq: number; limit: number }): Promise<EventRow[]> {
  return trx
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .where('seq', '>=', range.fromSeq)
    .where('seq', '<', range.beforeSeq)
    .orderBy('seq', 'desc')
    .limit(range.limit)
    .execute();
}


/** Sets the window start and/or memo (serialized JSON, null clears), bumps revision and update time. */
export async function updateContextFields(trx: Transaction<DB>, key: SessionKey, changes: { windowStartSeq?: number; memo?: string | null }): Promise<void> {
  await trx
    .updateTable('sessions')
    .set((eb) => ({
      ...(changes.windowStartSeq !== undefined ? { window_start_seq: changes.windowStartSeq } : {}),
      ...(changes.memo !== undefined ? { memo: changes.memo } : {}),
      revision: eb('revision', '+', 1),
      update_time: sql<Date>`date_trunc('milliseconds', now())`,
    }))
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .executeTakeFirstOrThrow();
}
