// The expiry sweeper's queries (expiry-sweeper.ts holds the batching, the transactions and why).
import { type Transaction, sql } from 'kysely';
import type { Executor } from '../../db/connect.js';
import type { DB } from '../../db/schema.js';

export interface RemovedSession {
  account_id: string;
  space_id: string;
  user_id: string;
}

/** A session the sweep found expired, before it is locked. */
export interface Candidate extends RemovedSession {
  session_id: string;
}

export interface UserSessionCount {
  accountId: string;
  spaceId: string;
  userId: string;
  count: number;
}

/** Expired sessions, oldest expiry first, without locks. `expire_time <= now()` implies the predicate of the partial index sessions_expiring, which also serves the order. */
export async function findExpiredSessions(db: Executor, batchSize: number): Promise<Candidate[]> {
  return db
    .selectFrom('sessions')
    .select(['account_id', 'space_id', 'user_id', 'session_id'])
    .where('expire_time', '<=', sql<Date>`now()`)
    .orderBy('expire_time')
    .limit(batchSize)
    .execute();
}

/** Deletes those of `candidates` (all of `accountId`) still expired and not locked by anyone (FOR UPDATE SKIP LOCKED). */
export async function deleteExpiredSessionsOfAccount(trx: Transaction<DB>, accountId: string, candidates: Candidate[]): Promise<RemovedSession[]> {
    const keys = candidates.map((c) => sql`(${c.space_id}, ${c.user_id}, ${c.session_id})`);
    return trx
      .deleteFrom('sessions')
      .where('account_id', '=', accountId)
      .where((eb) =>
        eb(
          eb.refTuple('space_id', 'user_id', 'session_id'),
          'in',
          eb
            .selectFrom('sessions')
            .select(['space_id', 'user_id', 'session_id'])
            .where('account_id', '=', accountId)
            .where(sql<boolean>`(space_id, user_id, session_id) IN (${sql.join(keys)})`)
            .where('expire_time', '<=', sql<Date>`now()`)
            .forUpdate()
            .skipLocked()
            .$asTuple('space_id', 'user_id', 'session_id'),
        ),
      )
      .returning(['account_id', 'space_id', 'user_id'])
      .execute();
}

/**
 * Takes the removed sessions (all of `accountId`) off their users' counts, locking the counters in
 * primary-key order (expiry-sweeper.ts says why).
 */
export async function decrementSessionCounts(trx: Transaction<DB>, accountId: string, perUser: UserSessionCount[]): Promise<void> {
    const users = perUser.map((user) => sql`(${user.accountId}, ${user.spaceId}, ${user.userId})`);
    // account_id = the account as well: Citus takes row locks only in a statement it can route to
    // one shard, which it does by an equality on the distribution column, not by a tuple IN list.
    await sql`
      SELECT 1 FROM space_users
      WHERE account_id = ${accountId} AND (account_id, space_id, user_id) IN (${sql.join(users)})
      ORDER BY account_id, space_id, user_id
      FOR UPDATE`.execute(trx);
    const decrements = perUser.map((user) => sql`(${user.accountId}, ${user.spaceId}, ${user.userId}, ${user.count}::bigint)`);
    await sql`
      UPDATE space_users AS u SET session_count = u.session_count - d.removed
      FROM (VALUES ${sql.join(decrements)}) AS d (account_id, space_id, user_id, removed)
      WHERE u.account_id = ${accountId} AND u.account_id = d.account_id AND u.space_id = d.space_id AND u.user_id = d.user_id`.execute(trx);
}
