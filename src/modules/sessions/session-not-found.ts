// The 404 of a session that is missing or expired. Another account's space, or a missing one,
// answers ResourceNotFound.SessionSpace instead, the same as for the space's own routes.
import type { Executor } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import { AppError } from '../../errors.js';
import { findSpaceOrThrow } from '../spaces/index.js';

/**
 * 404 for the session, or for its space when that is what is missing. Called once the session's
 * read has found nothing: the space's lookup is the second round trip of the failure path only.
 */
export async function sessionNotFound(db: Executor, key: SessionKey): Promise<AppError> {
  await findSpaceOrThrow(db, key.accountId, key.spaceId);
  return new AppError('ResourceNotFound.Session', `Session ${key.sessionId} of user ${key.userId} was not found.`);
}
