// Queries of export and import. Every query is scoped by account and space.
import { type Insertable, type Transaction, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB, EventRow, EventsTable, JsonObject } from '../../db/schema.js';
import type { SessionKey, UserKey } from '../../db/keys.js';

/** Rows per insert of imported events: 17 columns × 500 stays far below Postgres' 65,535 parameters. */
const INSERT_CHUNK = 500;

/** Events with fromSeq ≤ seq ≤ toSeq, by seq. */
export async function readEventRange(db: Executor, key: SessionKey, fromSeq: number, toSeq: number): Promise<EventRow[]> {
  return db
    .selectFrom('events')
    .selectAll()
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .where('session_id', '=', key.sessionId)
    .where('seq', '>=', fromSeq)
    .where('seq', '<=', toSeq)
    .orderBy('seq')
    .execute();
}

export async function insertEventRows(trx: Transaction<DB>, rows: Insertable<EventsTable>[]): Promise<void> {
  for (let start = 0; start < rows.length; start += INSERT_CHUNK) {
    await trx.insertInto('events').values(rows.slice(start, start + INSERT_CHUNK)).execute();
  }
}

/**
 * Adds `sessions` to the user's count and merges `keys` into its state (jsonb `||`: top-level
 * keys of `keys` replace the stored ones). Answers the resulting state.
 */
export async function mergeUserState(trx: Transaction<DB>, key: UserKey, keys: JsonObject, sessions: number): Promise<JsonObject> {
  const row = await trx
    .updateTable('space_users')
    .set((eb) => ({
      session_count: eb('session_count', '+', sessions),
      state: sql<string>`state || ${JSON.stringify(keys)}::jsonb`,
    }))
    .where('account_id', '=', key.accountId)
    .where('space_id', '=', key.spaceId)
    .where('user_id', '=', key.userId)
    .returning('state')
    .executeTakeFirstOrThrow();
  return row.state;
}

/** Merges `keys` into the space's state, as mergeUserState does; answers the resulting state. */
export async function mergeSpaceState(trx: Transaction<DB>, accountId: string, spaceId: string, keys: JsonObject): Promise<JsonObject> {
  const row = await trx
    .updateTable('session_spaces')
    .set({ state: sql<string>`state || ${JSON.stringify(keys)}::jsonb` })
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .returning('state')
    .executeTakeFirstOrThrow();
  return row.state;
}
