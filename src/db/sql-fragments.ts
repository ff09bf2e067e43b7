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

/**
 * The events of the session $1–$4 (account, space, user, session; sessionKeyParameters), written so
 * that a named statement over them is planned once per connection for any session. PostgreSQL plans
 * a named statement's first five runs for their values and goes on doing so while those plans look
 * cheaper than its plan for any values (plancache.c, choose_custom_plan): with the key as plain
 * parameters, a short session's events beside a long session's history looked cheaper, and every
 * read of a short session was planned again (bench/README.md; test/integration/context-read-plan.test.ts).
 * A value read through a subquery is estimated alike for any value. The account stays a plain
 * parameter: Citus routes a statement to the account's shard by it. The statements that use this
 * read their seq bounds and limit through subqueries too, for the same reason.
 */
export const EVENTS_OF_SESSION_KEY =
  'events.account_id = $1 AND events.space_id = (SELECT $2::text) AND events.user_id = (SELECT $3::text) AND events.session_id = (SELECT $4::text)';
