// SQL fragments that several repositories need to write the same way.
import { sql } from 'kysely';

/**
 * The database's now, cut to the milliseconds the API shows: a timestamp written with it reads back
 * as it was answered, and compares equal to a timestamp a caller copies from an answer.
 */
export const NOW_MS = sql<Date>`date_trunc('milliseconds', now())`;

/**
 * "The session has not expired" (no expiry, or one still ahead) as SQL text, for the statements
 * written as text; `sessions` is the name or alias of the sessions table in the statement. Expired
 * sessions count as gone before the sweeper deletes them.
 */
export const sessionNotExpiredText = (sessions: string): string => `(${sessions}.expire_time IS NULL OR ${sessions}.expire_time > now())`;

/** The same condition on the table `sessions`, for the query builder. */
export const SESSION_NOT_EXPIRED = sql<boolean>`${sql.raw(sessionNotExpiredText('sessions'))}`;
