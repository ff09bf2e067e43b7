// Queries of the context module. Every query is scoped by the full session key, account first.
import { type Transaction, sql } from 'kysely';
import type { DB, EventRow } from '../../db/schema.js';
import type { SessionKey } from '../sessions/sessions.repository.js';

export type { SessionKey };

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
