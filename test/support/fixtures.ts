// Direct inserts for test set-up, so a module's tests need not depend on another module's API.
import type { Database } from '../../src/db/connect.js';
import type { JsonObject } from '../../src/db/schema.js';
import { newSpaceId } from '../../src/lib/ids.js';

/**
 * A space of the account. Spaces list by createTime (milliseconds), then by id: each fixture space
 * is inserted in a later millisecond than the one before, so tests may expect creation order.
 */
export async function insertSpace(db: Database, accountId: string, name = 'fixture space'): Promise<string> {
  await new Promise((resolve) => setTimeout(resolve, 2));
  const spaceId = newSpaceId();
  await db.insertInto('session_spaces').values({ account_id: accountId, space_id: spaceId, name }).execute();
  return spaceId;
}

export async function insertSession(
  db: Database,
  key: { accountId: string; spaceId: string; userId: string; sessionId: string },
  fields: { state?: JsonObject; title?: string; metadata?: Record<string, string> } = {},
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    await trx
      .insertInto('space_users')
      .values({ account_id: key.accountId, space_id: key.spaceId, user_id: key.userId, session_count: 1 })
      .onConflict((oc) => oc.columns(['account_id', 'space_id', 'user_id']).doUpdateSet((eb) => ({ session_count: eb('space_users.session_count', '+', 1) })))
      .execute();
    await trx
      .insertInto('sessions')
      .values({
        account_id: key.accountId,
        space_id: key.spaceId,
        user_id: key.userId,
        session_id: key.sessionId,
        title: fields.title ?? '',
        metadata: JSON.stringify(fields.metadata ?? {}),
        state: JSON.stringify(fields.state ?? {}),
      })
      .execute();
  });
}
