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
// The calls beyond the first follow the queue, not the cap alone (issue 24). A second call sent as
// soon as a slot is free splits what would have been one batch into two smaller ones, which then
// compete for the database's CPU: on the 2-core bench machine one call at a time gave 15% more
// appends per second and a third less PostgreSQL CPU per append than two (bench/README.md). So while
// a call is out, another starts only when the waiting appends fill a whole batch (the queue has
// outgrown one call), or when every call out is overdue: out longer than twice the recent typical
// call and 20 ms (a batch waiting for a locked row, a slow disk), so that one slow call does not
// hold back everyone else's appends.
//
// Each append of a batch is still all or nothing by itself: a batch goes first as one call written
// whole or not at all, and one it refuses goes again with a subtransaction per append
// (append.repository.ts, appendBatchInDatabase). An append that the batch could not write (a
// refusal, a stored eventId, a missing session, a deadlock) is run again alone through
// appendInDatabase, so its answer is exactly the one it would have had alone.
//
// The batcher belongs to a database handle (one per instance: buildApp calls useAppendBatching);
// appends on a handle without one go alone.
//
// What never joins a batch: appends that write user: or app: state (they lock shared rows, and
// batches must hold session rows only, taken in key order, so that two batches cannot deadlock).
//
// On Citus (detected once, with the first batch: src/db/citus.ts) a batch holds the appends of one
// account only, sent as one call of append_events_of_account() (migrations/0011), which Citus
// delegates whole to the worker holding the account's shard; the appends of other accounts wait for
// the next batch. A batch of several accounts would run on the coordinator, one statement at a time
// to the workers, under two-phase commit.
//
// Heavy appends, whose answers carry large states (a space's state of a megabyte comes back with
// every append of its sessions), are taken fairly: once some wait, a call takes the accounts'
// appends in turns and at most BATCH_ANSWER_BYTES of expected answer (batch-choice.ts). What a
// session's next answer weighs is what the large states it carries weighed when they were last
// answered: its space's, its user's and its own (answer-weights.ts). And an append expected to be
// heavy is an expensive request: it waits for one of its account's expensive slots, and its
// answer's bytes are charged to its account's time share as the time this process spends on them
// (ANSWER_BYTES_PER_SECOND), besides the slot's holding. Such an append spends little database
// time: what it costs is PostgreSQL writing the states out and this process decoding and writing
// them again, which the holding alone would not charge.
//
// A locked session holds back only its own appends. A batch waits for rows locked
// elsewhere for at most `lockWaitMs` in all (migrations/0008); an append still waiting then leaves
// the batch. Every append run again alone goes through its session's queue, outside the batch
// slots: one call at a time per session, and while a session has a queue its new appends join that
// queue instead of the next batch, so a session that stays locked occupies one connection, not the
// batches of everyone else. An append that waited in such a queue longer than `sessionQueueWaitMs`
// is answered 503 without being sent.
//
// A session whose queue ended on its lock (its last append timed out waiting, or was answered 503
// unsent), or whose lone append in a batch slot timed out on its row, keeps sending its appends
// alone for `sessionQueueWaitMs` more. Otherwise its next append,
// sent again at once by a client that retries, would join a batch while the row is still locked
// and hold that batch up for `lockWaitMs` once more: one such stall per statement timeout for as
// long as the lock lasts, for the batch's appends of every account.
import type { Limits } from '../../config.js';
import type { Database } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import { AppError } from '../../errors.js';
import type { AccountSlots } from '../../lib/account-slots.js';
import type { AppendBatchCounts, AppendQueueDepth } from '../../lib/metrics-registry.js';
import { runInTurns } from '../../lib/turns.js';
import type { EventDocument } from './append-plan.js';
import { answeredBytes, createAnswerWeights } from './answer-weights.js';
import { chooseBatch } from './batch-choice.js';
import { type AppendedSession, type BatchResult, type BatchRow, type BatchScope, type BatchedAppend, appendBatchInDatabase, appendInDatabase, batchRolledBackWhole, isCitusDatabase, waitedOutLock } from './append.repository.js';

export interface AppendBatcherOptions {
  /** Appends per database call; 1 sends each alone. At most 32 (see the migration). */
  maxBatch: number;
  /** Append calls in the database at once from this instance. */
  concurrency: number;
  /** The state size limit every append of this instance is held to. */
  stateLimit: number;
  /** The longest a batch waits, in all, for session rows locked elsewhere. */
  lockWaitMs: number;
  /** The longest an append waits in its session's queue before it is answered 503 unsent. */
  sessionQueueWaitMs: number;
  /** An append whose stateDeltas are larger is known to be slow: alone, in an expensive slot. */
  aloneDeltaBytes: number;
  /** Shared fairly between accounts (src/lib/account-slots.ts). */
  expensiveSlots: AccountSlots;
  /** What one batch may hold: appends of any accounts, or of one account (Citus). Detected when left out. */
  batchScope?: BatchScope | undefined;
}

export type { BatchScope } from './append.repository.js';

/** The batcher an instance with these limits runs, its slow appends in `expensiveSlots`. */
export const batchingOptions = (limits: Limits, expensiveSlots: AccountSlots): AppendBatcherOptions => ({
  maxBatch: limits.appendBatchMax,
  concurrency: limits.appendBatchConcurrency,
  stateLimit: limits.stateBytes,
  lockWaitMs: limits.appendBatchLockWaitMs,
  sessionQueueWaitMs: limits.appendSessionQueueWaitMs,
  aloneDeltaBytes: limits.appendAloneDeltaBytes,
  expensiveSlots,
});

interface Waiting {
  key: SessionKey;
  /** sessionIdOf(key). */
  id: string;
  events: EventDocument[];
  ifMatch: number[] | undefined;
  /** The answer bytes expected of it when it arrived (answer-weights.ts; 0 while no large state is known). */
  expectedBytes: number;
  /** performance.now() when the append reached the batcher. */
  arrivedAt: number;
  resolve: (session: AppendedSession | undefined) => void;
  reject: (error: unknown) => void;
}

export class AppendBatcher implements AppendQueueDepth {
  /** Read by /metrics (the append_batch*_total counters and append_sent_alone_total). */
  readonly stats: AppendBatchCounts = { batches: 0, batchedAppends: 0, refusedWhole: 0, rerunAlone: 0, sentAlone: { sharedState: 0, largeDelta: 0 }, calls: 0, callSeconds: 0 };
  private readonly waiting: Waiting[] = [];
  /** How many of `waiting` are heavy. */
  private heavyWaiting = 0;
  /** The calls now out, each with the performance.now() at which it was sent (an object each: two may share a time). */
  private readonly callsInFlight = new Set<CallOut>();
  /** The recent typical duration of a call, in ms (a moving average). */
  private typicalCallMs = INITIAL_TYPICAL_CALL_MS;
  /** Set while appends wait for a call out to become overdue. */
  private overdueTimer: NodeJS.Timeout | undefined;
  /** The queues of the sessions with an append running alone, by sessionId of the key. */
  private readonly sessionQueues = new Map<string, Waiting[]>();
  /**
   * Sessions whose queue ended on its lock, with the performance.now() until which their appends
   * still go alone. In the order they were set, which is the order they end in (one duration).
   */
  private readonly lockedUntil = new Map<string, number>();
  private batchScope: BatchScope | undefined;
  private detectingScope = false;
  /** The large states the answers carried, by space, user and session: what the next answers will weigh. */
  private readonly weights = createAnswerWeights({ partBytes: HEAVY_PART_BYTES, capacity: REMEMBERED_HEAVY_PARTS });

  constructor(
    private readonly db: Database,
    private readonly options: AppendBatcherOptions,
  ) {
    this.batchScope = options.batchScope;
  }

  /** Read by /metrics (append_batch_waiting). */
  get appendsWaiting(): number {
    return this.waiting.length;
  }

  /** Read by /metrics (append_batch_calls_out). */
  get callsOut(): number {
    return this.callsInFlight.size;
  }

  /** What a batch holds; undefined until detected (with the first append that may join a batch). */
  get scope(): BatchScope | undefined {
    return this.batchScope;
  }

  /**
   * appendInDatabase's contract: the session after the append, undefined if it is missing, or its
   * error. `deltaBytes`: the serialized size of the events' stateDeltas. `accountDb`: the database as
   * the append's account (db/connect.ts), what it runs on when it goes alone from here; by default the
   * batcher's own, which keeps to no account's share.
   */
  append(key: SessionKey, events: EventDocument[], ifMatch: number[] | undefined, deltaBytes = 0, accountDb: Database = this.db): Promise<AppendedSession | undefined> {
    // A large delta makes a slow call (its merge, its write, its WAL): it would hold back every
    // append of a batch, and a batch slot, so it goes alone, in one of its account's expensive slots.
    if (deltaBytes > this.options.aloneDeltaBytes) {
      this.stats.sentAlone.largeDelta++;
      return this.options.expensiveSlots.run(key.accountId, () => this.alone({ key, events, ifMatch }, accountDb));
    }
    if (this.options.maxBatch <= 1) return this.alone({ key, events, ifMatch }, accountDb);
    if (writesSharedState(events)) {
      this.stats.sentAlone.sharedState++;
      return this.alone({ key, events, ifMatch }, accountDb);
    }
    const id = sessionIdOf(key);
    const expectedBytes = this.weights.any ? this.weights.expected(key) : 0;
    if (expectedBytes >= HEAVY_ANSWER_BYTES) {
      const slots = this.options.expensiveSlots;
      return slots.run(key.accountId, async () => {
        const answer = await this.enqueue(key, id, events, ifMatch, expectedBytes);
        if (answer) slots.chargeExtra(key.accountId, answeredBytes(answer) / ANSWER_BYTES_PER_SECOND);
        return answer;
      });
    }
    return this.enqueue(key, id, events, ifMatch, expectedBytes);
  }

  /** Queues the append for the next batch (or its session's queue, while that has one). */
  private enqueue(key: SessionKey, id: string, events: EventDocument[], ifMatch: number[] | undefined, expectedBytes: number): Promise<AppendedSession | undefined> {
    return new Promise((resolve, reject) => {
      const waiting: Waiting = { key, id, events, ifMatch, expectedBytes, arrivedAt: performance.now(), resolve, reject };
      if (this.sessionQueues.has(id) || this.stillLocked(id)) return this.queueAlone(waiting);
      this.waiting.push(waiting);
      if (isHeavy(waiting)) this.heavyWaiting++;
      this.sendWaiting();
    });
  }

  private sendWaiting(): void {
    if (this.batchScope === undefined) return this.detectScope();
    for (let kind = this.nextCallKind(); kind !== undefined; kind = this.nextCallKind()) {
      const batch = this.takeBatch(kind);
      const call: CallOut = { sentAt: performance.now(), heavy: kind === 'heavy' };
      this.callsInFlight.add(call);
      // A batch carries several accounts' appends: its connection is no one account's (this.db, db/fair-pool.ts).
      void this.send(batch, call.heavy).finally(() => {
        this.callsInFlight.delete(call);
        const tookMs = performance.now() - call.sentAt;
        this.stats.calls++;
        this.stats.callSeconds += tookMs / 1000;
        if (!call.heavy) this.typicalCallMs += (Math.min(tookMs, MAX_TYPICAL_CALL_MS) - this.typicalCallMs) * TYPICAL_CALL_WEIGHT;
        this.sendWaiting();
      });
    }
    if (this.waiting.length > 0) this.wakeWhenOverdue();
  }

  /**
   * Which call may go out now, if any. Light appends go as they always did: at once when no light
   * call is out, or when the queue fills a batch, or when the light calls out are overdue. Heavy
   * appends go in calls of their own, one such call at a time: with two calls or more allowed, a
   * light append never waits behind the megabytes of a heavy call's answers, neither in its call
   * nor for a call of its own. When both kinds may go (and with one call allowed, the embedded
   * database's), the kind of the oldest waiting append goes first, so neither kind starves.
   */
  private nextCallKind(): CallKind | undefined {
    if (this.waiting.length === 0 || this.callsInFlight.size >= this.options.concurrency) return undefined;
    const heavyWaiting = this.heavyWaiting;
    const lightWaiting = this.waiting.length - heavyWaiting;
    let lightOut = 0;
    for (const call of this.callsInFlight) if (!call.heavy) lightOut++;
    const heavyOut = this.callsInFlight.size - lightOut;
    const lightMayGo = lightWaiting > 0 && (lightOut === 0 || lightWaiting >= this.options.maxBatch || this.untilOverdue() <= 0);
    const heavyMayGo = heavyWaiting > 0 && heavyOut === 0;
    if (lightMayGo && heavyMayGo) return isHeavy(this.waiting[0]!) ? 'heavy' : 'light';
    return lightMayGo ? 'light' : heavyMayGo ? 'heavy' : undefined;
  }

  /** Milliseconds until the newest light call out is overdue (≤ 0: it is). */
  private untilOverdue(): number {
    let newest = 0;
    for (const call of this.callsInFlight) if (!call.heavy) newest = Math.max(newest, call.sentAt);
    return newest + Math.max(MIN_OVERDUE_MS, OVERDUE_FACTOR * this.typicalCallMs) - performance.now();
  }

  /** Looks at the queue again when the light calls out become overdue, unless one answers first. */
  private wakeWhenOverdue(): void {
    if (this.overdueTimer || this.callsInFlight.size === 0 || this.callsInFlight.size >= this.options.concurrency) return;
    this.overdueTimer = setTimeout(() => {
      this.overdueTimer = undefined;
      this.sendWaiting();
    }, Math.max(1, Math.ceil(this.untilOverdue())));
    this.overdueTimer.unref();
  }

  /**
   * The next batch of `kind`: the oldest waiting appends, or on Citus the oldest of the first one's
   * account; while heavy sessions are known, the accounts' appends of that kind in turns, heavy
   * ones within BATCH_ANSWER_BYTES.
   */
  private takeBatch(kind: CallKind): Waiting[] {
    if (this.heavyWaiting > 0) {
      const ofKind = (waiting: Waiting) => isHeavy(waiting) === (kind === 'heavy');
      const first = this.waiting.find(ofKind)!;
      const onlyAccount = this.batchScope === 'one-account' ? first.key.accountId : undefined;
      const weighed = this.waiting.map((item) => ({ item, accountId: item.key.accountId, bytes: item.expectedBytes, eligible: ofKind(item) }));
      const { batch, rest } = chooseBatch(weighed, this.options.maxBatch, BATCH_ANSWER_BYTES, onlyAccount);
      this.waiting.splice(0, this.waiting.length, ...rest);
      if (kind === 'heavy') this.heavyWaiting -= batch.length;
      return batch;
    }
    const onlyAccount = this.batchScope === 'one-account' ? this.waiting[0]!.key.accountId : undefined;
    if (onlyAccount === undefined) return this.waiting.splice(0, this.options.maxBatch);
    const accountId = onlyAccount;
    const batch: Waiting[] = [];
    const others: Waiting[] = [];
    for (const waiting of this.waiting) {
      (waiting.key.accountId === accountId && batch.length < this.options.maxBatch ? batch : others).push(waiting);
    }
    this.waiting.splice(0, this.waiting.length, ...others);
    return batch;
  }

  /**
   * Asks the database once whether it is Citus, then sends what waited meanwhile. If it cannot be
   * asked (the database is away), the appends waiting go alone and the next one asks again.
   */
  private detectScope(): void {
    if (this.detectingScope) return;
    this.detectingScope = true;
    isCitusDatabase(this.db).then(
      (citus) => {
        this.detectingScope = false;
        this.batchScope = citus ? 'one-account' : 'any-accounts';
        this.sendWaiting();
      },
      () => {
        this.detectingScope = false;
        this.heavyWaiting = 0;
        for (const waiting of this.waiting.splice(0)) void settle(waiting, this.alone(waiting));
      },
    );
  }

  /** Resolves when the batch's call is answered; the appends it did not write go on alone, outside the slot. */
  private async send(batch: Waiting[], heavy: boolean): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch as [Waiting];
      const outcome = this.alone(only).then((row) => {
        if (row) this.weights.note(only.key, row);
        return row;
      });
      if (waitedOutLock(await settle(only, outcome))) this.markLocked(only.id);
      return;
    }
    // Session key order: every batch locks its sessions in the same order. The sort is stable, so
    // two appends of one session keep the order in which they arrived.
    batch.sort((a, b) => compareKeys(a.key, b.key));
    // Counted when sent: a call whose connection is lost carried its appends all the same.
    this.stats.batches++;
    this.stats.batchedAppends += batch.length;
    let rows: BatchRow[];
    try {
      const result = await this.callBatch(batch);
      if (result.refusedWhole) this.stats.refusedWhole++;
      rows = result.rows;
    } catch (error) {
      if (!batchRolledBackWhole(error)) return batch.forEach((waiting) => waiting.reject(error));
      rows = [];
    }
    const written = new Map(rows.map((row) => [row.ordinal, row]));
    // The appends are answered after the next call is out: this call's slot frees as soon as send()
    // returns, the next batch goes to the database in the microtasks that follow, and the answers
    // (JSON, socket writes) are built while the database works on it, instead of before it is sent.
    setImmediate(() => {
      const answers: [Waiting, BatchRow][] = [];
      batch.forEach((waiting, index) => {
        const row = written.get(index + 1);
        // The row is the append's answer as it is (its ordinal, one column more, is left unread).
        if (row) {
          this.weights.note(waiting.key, row);
          return answers.push([waiting, row]);
        }
        this.stats.rerunAlone++;
        this.queueAlone(waiting);
      });
      if (!heavy) {
        for (const [waiting, row] of answers) waiting.resolve(row);
        return;
      }
      // A heavy answer is milliseconds of this process's work (its megabyte written to the socket):
      // each is answered in a turn of the event loop of its own, so that the requests that arrived
      // meanwhile, of every account, are read and answered between them, not after all of them.
      runInTurns(answers.map(([waiting, row]) => () => waiting.resolve(row)));
    });
  }

  private callBatch(batch: Waiting[]): Promise<BatchResult> {
    const appends = batch.map(({ key: { accountId, spaceId, userId, sessionId }, events, ifMatch }) => {
      const append: BatchedAppend = { accountId, spaceId, userId, sessionId, events };
      if (ifMatch) append.ifMatch = ifMatch;
      return append;
    });
    const { stateLimit, lockWaitMs } = this.options;
    return appendBatchInDatabase(this.db, { scope: this.batchScope ?? 'any-accounts', accountId: batch[0]!.key.accountId }, appends, stateLimit, lockWaitMs);
  }

  /** Runs the append alone, after the appends of its session queued before it. */
  private queueAlone(waiting: Waiting): void {
    const id = waiting.id;
    const queue = this.sessionQueues.get(id);
    if (queue) return void queue.push(waiting);
    this.sessionQueues.set(id, [waiting]);
    void this.drainSessionQueue(id);
  }

  private async drainSessionQueue(id: string): Promise<void> {
    const queue = this.sessionQueues.get(id)!;
    let endedOnLock = false;
    for (let next = queue.shift(); next; next = queue.shift()) {
      if (performance.now() - next.arrivedAt > this.options.sessionQueueWaitMs) {
        next.reject(sessionStillLocked());
        endedOnLock = true;
      } else {
        endedOnLock = waitedOutLock(await settle(next, this.alone(next)));
      }
    }
    this.sessionQueues.delete(id);
    if (endedOnLock) this.markLocked(id);
  }

  /** Whether the session's queue ended on its lock less than `sessionQueueWaitMs` ago. */
  private stillLocked(id: string): boolean {
    const until = this.lockedUntil.get(id);
    if (until === undefined) return false;
    if (until > performance.now()) return true;
    this.lockedUntil.delete(id);
    return false;
  }

  private markLocked(id: string): void {
    const now = performance.now();
    // Marks end in the order they were set: the expired ones are at the front.
    for (const [marked, until] of this.lockedUntil) {
      if (until > now) break;
      this.lockedUntil.delete(marked);
    }
    this.lockedUntil.delete(id);
    this.lockedUntil.set(id, now + this.options.sessionQueueWaitMs);
  }

  /**
   * One append in a call of its own: on its account's share of the pool (`db`) when it comes straight
   * from its request; an append a batch could not write, or one of those waiting when the batch's
   * scope could not be found, goes on no account's (this.db), as the batch did: a call that waits
   * for one account's turn must not hold a batch slot every account's appends need.
   */
  private alone({ key, events, ifMatch }: Pick<Waiting, 'key' | 'events' | 'ifMatch'>, db: Database = this.db): Promise<AppendedSession | undefined> {
    return appendInDatabase(db, key, events, ifMatch, this.options.stateLimit, this.batchScope === 'any-accounts');
  }
}

const isHeavy = (waiting: Waiting) => waiting.expectedBytes >= HEAVY_ANSWER_BYTES;

/** A call of light appends, or of heavy ones (nextCallKind). */
type CallKind = 'light' | 'heavy';

interface CallOut {
  sentAt: number;
  heavy: boolean;
}

/** The typical call assumed before any was measured; a call counts as overdue past OVERDUE_FACTOR × the typical one. */
const INITIAL_TYPICAL_CALL_MS = 5;
const OVERDUE_FACTOR = 2;
/** A call out for less is never overdue: a few milliseconds more make a batch, not a stall. */
const MIN_OVERDUE_MS = 20;
/** A longer call is a stall (a lock wait), not what calls typically take: it counts as this long. */
const MAX_TYPICAL_CALL_MS = 50;
/** The weight of the newest call in the moving average of call durations. */
const TYPICAL_CALL_WEIGHT = 0.2;
/** An append expected to answer this much of states (in characters of JSON text) is heavy. */
const HEAVY_ANSWER_BYTES = 64 * 1024;
/** A state this large (a session's, a user's or a space's) is remembered as a part of the answers that carry it. */
const HEAVY_PART_BYTES = 32 * 1024;
/** What one call's answers may carry, expected from their sessions' last answers (the first append always goes). */
const BATCH_ANSWER_BYTES = 4 * 1024 * 1024;
/** Large states remembered, of each kind; the one answered longest ago is forgotten first (and then counts as light). */
const REMEMBERED_HEAVY_PARTS = 10_000;
/**
 * What this process gets through of a heavy answer per second of CPU: PostgreSQL's text decoded,
 * the answer written (bench:neighbours attack 5: ~17 ms of server CPU per append answering 1 MB).
 */
const ANSWER_BYTES_PER_SECOND = 60 * 1024 * 1024;

/** The group commit of one instance's appends on `db` (its append path's, src/modules/events/append.service.ts). */
export function createAppendBatcher(db: Database, options: AppendBatcherOptions): AppendBatcher {
  return new AppendBatcher(db, options);
}

const sessionStillLocked = () =>
  new AppError('ResourceUnavailable.Database', 'The session stayed locked by another transaction; retry later.', { headers: { 'retry-after': '1' } });

const sessionIdOf = ({ accountId, spaceId, userId, sessionId }: SessionKey) => `${accountId}\u0000${spaceId}\u0000${userId}\u0000${sessionId}`;

const writesSharedState = (events: EventDocument[]) => events.some((event) => event.user !== undefined || event.app !== undefined);

/** The order in which a batch locks its sessions (any two batches take them in this order). */
export function compareKeys(a: SessionKey, b: SessionKey): number {
  return compare(a.accountId, b.accountId) || compare(a.spaceId, b.spaceId) || compare(a.userId, b.userId) || compare(a.sessionId, b.sessionId);
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Answers `waiting` with the outcome; resolves to the error it was answered with, if any. */
async function settle(waiting: Waiting, outcome: Promise<AppendedSession | undefined>): Promise<unknown> {
  try {
    waiting.resolve(await outcome);
    return undefined;
  } catch (error) {
    waiting.reject(error);
    return error;
  }
}
