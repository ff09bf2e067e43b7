// The one check every space-scoped operation starts with. Another account's space answers the
// same 404 as a missing one: no existence oracle.
import type { Executor } from '../../db/connect.js';
import type { SpaceRow } from '../../db/schema.js';
import { AppError } from '../../errors.js';
import { type SpaceLock, findSpaceRow } from './spaces.repository.js';

/**
 * `lock: 'share'` (inside a transaction) keeps the space from being deleted until the transaction
 * ends: creating a session takes it, deleting a space takes the row FOR UPDATE, so the two cannot
 * interleave into a session in a deleted space.
 */
export async function findSpaceOrThrow(
  db: Executor,
  accountId: string,
  spaceId: string,
  lock?: SpaceLock,
): Promise<SpaceRow> {
  const space = await findSpaceRow(db, accountId, spaceId, lock);
  if (!space) throw spaceNotFound(spaceId);
  return space;
}

export function spaceNotFound(spaceId: string): AppError {
  return new AppError('ResourceNotFound.SessionSpace', `Session space ${spaceId} was not found.`);
}
