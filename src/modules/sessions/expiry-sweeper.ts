// Removes expired sessions (docs/design.md §4.8) in bounded batches. Expired sessions already answer 404
// everywhere; this only reclaims their rows. Several instances may sweep the same database at once.
import type { Database } from '../../db/connect.js';
import { logTaskFailure } from '../../db/errors.js';
import { type PeriodicTask, type TaskLogger, startPeriodicTask } from '../../lib/periodic-task.js';
import {
  type Candidate,
  type RemovedSession,
  type UserSessionCount,
  decrementSessionCounts,
  deleteExpiredSessionsOfAccount,
  findExpiredSessions,
} from './expiry.repository.js';

export interface SweepOptions {
  /** Most sessions one sweep deletes; bounds the transaction's length and its locks. */
  batchSize: number;
}

/**
 * Deletes up to `batchSize` expired sessions with their events (the sessions_delete_events
 * trigger) and takes them off their users' session counts; answers how many it deleted.
 *
 * Two steps, so that every locking statement stays within one account (one shard when the tables
 * are distributed by account_id, docs/scale-out.md; Citus runs FOR UPDATE only in single-shard
 * statements): the batch is chosen without locks, oldest expiry first, then each account's part
 * is deleted in a transaction of its own. There the rows are taken with FOR UPDATE SKIP LOCKED and
 * the expiry is checked again: two sweepers never delete the same session nor wait for each other,
 * a session locked right now (an append or a PATCH in flight) is left for a later round, and one
 * whose expiry was extended meanwhile stays. The counters are locked in one fixed order, so two
 * sweepers decrementing the same users cannot deadlock.
 */
export async function sweepExpiredSessions(db: Database, { batchSize }: SweepOptions): Promise<number> {
  // `expire_time <= now()` implies the predicate of the partial index sessions_expiring, which
  // also serves the order (expiry.repository.ts).
  const candidates = await findExpiredSessions(db, batchSize);
  let removed = 0;
  for (const [accountId, sessions] of groupByAccount(candidates)) removed += await sweepAccount(db, accountId, sessions);
  return removed;
}

async function sweepAccount(db: Database, accountId: string, candidates: Candidate[]): Promise<number> {
  return db.transaction().execute(async (trx) => {
    const removed = await deleteExpiredSessionsOfAccount(trx, accountId, candidates);
    if (removed.length === 0) return 0;

    const perUser = countPerUser(removed);
    await decrementSessionCounts(trx, accountId, perUser);
    return removed.length;
  });
}

function groupByAccount(candidates: Candidate[]): Map<string, Candidate[]> {
  const byAccount = new Map<string, Candidate[]>();
  for (const candidate of candidates) {
    const sessions = byAccount.get(candidate.account_id) ?? [];
    sessions.push(candidate);
    byAccount.set(candidate.account_id, sessions);
  }
  return byAccount;
}

function countPerUser(rows: RemovedSession[]): UserSessionCount[] {
  const byUser = new Map<string, UserSessionCount>();
  for (const row of rows) {
    const key = JSON.stringify([row.account_id, row.space_id, row.user_id]);
    const entry = byUser.get(key) ?? { accountId: row.account_id, spaceId: row.space_id, userId: row.user_id, count: 0 };
    entry.count += 1;
    byUser.set(key, entry);
  }
  return [...byUser.values()];
}

export interface ExpirySweeperOptions extends SweepOptions {
  /** Pause between ticks, counted from the end of the previous tick. */
  intervalMs: number;
  logger: TaskLogger;
  /** Full batches repeat at once within a tick, up to this many, so a backlog drains quickly but no tick runs forever. */
  maxBatchesPerTick?: number;
}

/** Cancels the next tick and waits for a sweep in flight to finish. */
export type ExpirySweeper = PeriodicTask;

export const DEFAULT_MAX_BATCHES_PER_TICK = 20;

/** Sweeps on a timer that never keeps the process alive and never throws. */
export function startExpirySweeper(db: Database, options: ExpirySweeperOptions): ExpirySweeper {
  const { intervalMs, batchSize, logger, maxBatchesPerTick = DEFAULT_MAX_BATCHES_PER_TICK } = options;
  return startPeriodicTask(async (stopping) => {
    let removed = 0;
    try {
      for (let batch = 0; batch < maxBatchesPerTick && !stopping(); batch++) {
        const count = await sweepExpiredSessions(db, { batchSize });
        removed += count;
        if (count < batchSize) break;
      }
    } catch (err) {
      // The next tick tries again; a failing database must not take the process down.
      logTaskFailure(logger, err, 'expiry sweep');
    }
    if (removed > 0) logger.info({ removed }, 'expired sessions removed');
  }, intervalMs);
}
