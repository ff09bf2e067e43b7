// Group commit for appends (migrations/0007_append_batches.sql, bench/README.md).
//
// An append is one statement, but each call of it is also one round trip, one top-level statement
// and one commit (a WAL flush), and on a busy instance those cost as much as the append's own work
// (bench/README.md, issue 9 stop 18: the profile and the measurements). So an instance sends
// at most `concurrency` append calls to the database at once; appends that arrive while all of them
// are out wait, and the next call takes every waiting append (up to `maxBatch`) as one batch:
// one round trip and one commit for all. Under light load nothing waits and every append goes out
// alone, as append_events(); the batch only forms when appends queue anyway.
//
// Each append of a batch is still all or nothing by itself (a subtransaction in the database). One
// that the batch could not write (a refusal, a stored eventId, a missing session, a deadlock) is run
// again alone through appendInDatabase, so its answer is exactly the one it would have had alone.
//
// The batcher belongs to a database handle (one per instance: buildApp calls useAppendBatching);
// appends on a handle without one go alone.
//
// What never joins a batch: appends that write user: or app: state (they lock shared rows, and
// batches must hold session rows only, taken in key order, so that two batches cannot deadlock).
import { CompiledQuery } from 'kysely';
import type { Database } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import { preparedStatement } from '../../db/prepared-statements.js';
import type { AppendBatchCounts } from '../../lib/metrics-registry.js';
import type { EventDocument } from './append-plan.js';
import { type AppendedSession, appendInDatabase } from './append.repository.js';

export interface AppendBatcherOptions {
  /** Appends per database call; 1 sends each alone. At most 32 (see the migration). */
  maxBatch: number;
  /** Append calls in the database at once from this instance. */
  concurrency: number;
  /** The state size limit every append of this instance is held to. */
  stateLimit: number;
}

interface Waiting {
  key: SessionKey;
  events: EventDocument[];
  ifMatch: number[] | undefined;
  resolve: (session: AppendedSession | undefined) => void;
  reject: (error: unknown) => void;
}

/** A row of append_events_batch(): an append it wrote, by its 1-based place in the batch. */
interface BatchRow extends AppendedSession {
  ordinal: number;
}

const APPEND_EVENTS_BATCH = preparedStatement('append_events_batch', 'SELECT * FROM append_events_batch($1::jsonb, $2)');

/** PostgreSQL's query_canceled (statement timeout, cancel): the whole call was rolled back. */
const QUERY_CANCELED = '57014';

export class AppendBatcher {
  /** Read by /metrics (append_batches_total and the two after it). */
  readonly stats: AppendBatchCounts = { batches: 0, batchedAppends: 0, rerunAlone: 0 };
  private readonly waiting: Waiting[] = [];
  private inFlight = 0;

  constructor(
    private readonly db: Database,
    private readonly options: AppendBatcherOptions,
  ) {}

  /** appendInDatabase's contract: the session after the append, undefined if it is missing, or its error. */
  append(key: SessionKey, events: EventDocument[], ifMatch: number[] | undefined): Promise<AppendedSession | undefined> {
    if (this.options.maxBatch <= 1 || writesSharedState(events)) return this.alone({ key, events, ifMatch });
    return new Promise((resolve, reject) => {
      this.waiting.push({ key, events, ifMatch, resolve, reject });
      this.sendWaiting();
    });
  }

  private sendWaiting(): void {
    while (this.inFlight < this.options.concurrency && this.waiting.length > 0) {
      const batch = this.waiting.splice(0, this.options.maxBatch);
      this.inFlight++;
      void this.send(batch).finally(() => {
        this.inFlight--;
        this.sendWaiting();
      });
    }
  }

  private async send(batch: Waiting[]): Promise<void> {
    if (batch.length === 1) return settle(batch[0]!, this.alone(batch[0]!));
    // Session key order: every batch locks its sessions in the same order. The sort is stable, so
    // two appends of one session keep the order in which they arrived.
    batch.sort((a, b) => compareKeys(a.key, b.key));
    let rows: BatchRow[];
    try {
      rows = await this.callBatch(batch);
    } catch (error) {
      // A timeout or cancel rolled the whole call back: each append gets its own chance. Anything
      // else (a lost connection) leaves it unknown what committed, as it would for one append.
      if ((error as { code?: string }).code !== QUERY_CANCELED) return batch.forEach((waiting) => waiting.reject(error));
      rows = [];
    }
    this.stats.batches++;
    this.stats.batchedAppends += batch.length;
    const written = new Map(rows.map((row) => [row.ordinal, row]));
    const again: Promise<void>[] = [];
    batch.forEach((waiting, index) => {
      const row = written.get(index + 1);
      if (row) return waiting.resolve(sessionOf(row));
      this.stats.rerunAlone++;
      again.push(settle(waiting, this.alone(waiting)));
    });
    await Promise.all(again);
  }

  private async callBatch(batch: Waiting[]): Promise<BatchRow[]> {
    const appends = batch.map(({ key, events, ifMatch }) => ({ ...key, events, ...(ifMatch ? { ifMatch } : {}) }));
    const result = await this.db.executeQuery<BatchRow>(CompiledQuery.raw(APPEND_EVENTS_BATCH, [JSON.stringify(appends), this.options.stateLimit]));
    return result.rows;
  }

  private alone({ key, events, ifMatch }: Pick<Waiting, 'key' | 'events' | 'ifMatch'>): Promise<AppendedSession | undefined> {
    return appendInDatabase(this.db, key, events, ifMatch, this.options.stateLimit);
  }
}

const batchers = new WeakMap<Database, AppendBatcher>();

/** Groups the appends made on `db` from now on (replacing an earlier batcher of it). */
export function useAppendBatching(db: Database, options: AppendBatcherOptions): AppendBatcher {
  const batcher = new AppendBatcher(db, options);
  batchers.set(db, batcher);
  return batcher;
}

export const appendBatcherOf = (db: Database): AppendBatcher | undefined => batchers.get(db);

const writesSharedState = (events: EventDocument[]) => events.some((event) => event.user !== undefined || event.app !== undefined);

function compareKeys(a: SessionKey, b: SessionKey): number {
  return compare(a.accountId, b.accountId) || compare(a.spaceId, b.spaceId) || compare(a.userId, b.userId) || compare(a.sessionId, b.sessionId);
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

function sessionOf({ ordinal: _ordinal, ...session }: BatchRow): AppendedSession {
  return session;
}

async function settle(waiting: Waiting, outcome: Promise<AppendedSession | undefined>): Promise<void> {
  try {
    waiting.resolve(await outcome);
  } catch (error) {
    waiting.reject(error);
  }
}
