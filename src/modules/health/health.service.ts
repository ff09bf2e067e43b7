// Readiness: the service is ready when its database answers.
import type { Database } from '../../db/connect.js';
import { AppError } from '../../errors.js';
import { databaseAnswers } from './health.repository.js';

const READINESS_TIMEOUT_MS = 2_000;

/** Throws 503 ResourceUnavailable.Database unless the database answers within two seconds. */
export async function checkReadiness(db: Database): Promise<void> {
  try {
    await databaseAnswers(db, READINESS_TIMEOUT_MS);
  } catch (error) {
    throw new AppError('ResourceUnavailable.Database', 'The database is not reachable.', { headers: { 'retry-after': '2' }, cause: error });
  }
}
