// The one check every space-scoped operation starts with. Another account's space answers the
// same 404 as a missing one: no existence oracle.
import type { Transaction } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { DB, SpaceRow } from '../../db/schema.js';
import { AppError } from '../../errors.js';

export async function findSpaceOrThrow(db: Database | Transaction<DB>, accountId: string, spaceId: string): Promise<SpaceRow> {
  const space = await db
    .selectFrom('session_spaces')
    .selectAll()
    .where('account_id', '=', accountId)
    .where('space_id', '=', spaceId)
    .executeTakeFirst();
  if (!space) throw new AppError('ResourceNotFound.SessionSpace', `Session space ${spaceId} was not found.`);
  return space;
}
