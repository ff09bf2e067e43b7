// The Prometheus instruments of one application instance (docs/design.md §3 `GET /metrics`, issue 5).
// Each buildApp() gets its own Registry, never prom-client's global one, so several apps in one
// process (the test suite, two instances in a fault test) neither collide nor share counts.
// Process metrics (RSS, heap, event-loop lag, GC) describe the process, not an app: they live in
// one registry per process, because every collectDefaultMetrics() call starts an event-loop delay
// monitor and a GC observer that are never stopped.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { type RequestTally, registerRequestTally } from './request-tally.js';
import { type LabelledHistogram, registerLabelledHistogram } from './tally.js';

/** What the pool gauges read at scrape time: a pg.Pool has all of these. */
export interface PoolStats {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
  readonly options: { max?: number | undefined };
}

export interface AppMetrics {
  /** Counts and times every request except the scrapes of /metrics itself. */
  http: RequestTally;
  /** Every successful append adds to these: plain numbers, read when scraped (lib/tally.ts). */
  appends: {
    counts: AppendCounts;
    /** By scope: session, user or app. */
    stateBytes: LabelledHistogram;
  };
  stateAt: StateAtMetrics;
  /** The exposition: this app's metrics followed by the process's. */
  render(): Promise<string>;
  readonly contentType: string;
}

// 1 ms … 5 s: an append on a warm pool is a few ms; above 5 s the statement timeout has long hit.
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
// 64 B … 1 MiB (the default MAX_STATE_BYTES), by powers of 4.
const STATE_BYTES_BUCKETS = [64, 256, 1024, 4096, 16_384, 65_536, 262_144, 1_048_576];

let processRegistry: Registry | undefined;

function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** What the state-at replays (GET …/state-at/{seq}) did: their cost is the events they fold. */
export interface StateAtMetrics {
  /** Events folded by one statement: a checkpoint step or the final fold. */
  statementEvents: Histogram;
  checkpointsWritten: Counter;
}

/** What successful appends counted so far (append_requests_total by outcome, and the events' counters). */
export interface AppendCounts {
  appended: number;
  replayed: number;
  eventsAppended: number;
  eventsReplayed: number;
  stateDeltaBytes: number;
}

/** What the instance's group commit of appends (events/append-batcher.ts) counted so far. */
export interface AppendBatchCounts {
  /** Database calls that carried more than one append. */
  batches: number;
  /** Appends those calls carried. */
  batchedAppends: number;
  /** Batches that could not be written whole (an append of them refused) and went again append by append. */
  refusedWhole: number;
  /** Appends of a batch that the batch did not write and that were run again alone. */
  rerunAlone: number;
  /** Appends never offered to a batch: they write user: or app: state, or carry a large delta. */
  sentAlone: { sharedState: number; largeDelta: number };
  /** Calls sent from the batcher's slots, a batch or one append alone. */
  calls: number;
  /** Seconds those calls were out at the database, summed over the calls. */
  callSeconds: number;
}

/** The batcher's queue now: appends waiting for the next call, and the calls out. */
export interface AppendQueueDepth {
  readonly appendsWaiting: number;
  readonly callsOut: number;
}

/** What the instance's event streams (events/event-stream.service.ts) counted so far. */
export interface EventStreamCounts {
  /** Streams open now. */
  open: number;
  /** Reads of new events made once for all the streams of a session (one per wake-up). */
  sharedReads: number;
  /** Reads made by one stream alone: its history when it opens, or again after it fell behind. */
  catchUpReads: number;
}

/** Slots shared between accounts (lib/account-slots.ts): held now, and holders waiting. */
export interface SlotCounts {
  readonly running: number;
  readonly waiting: number;
}

export function createAppMetrics({
  pool,
  appendBatches,
  appendQueue,
  eventStreams,
  expensiveSlots,
  exportSlots,
}: {
  pool?: PoolStats | undefined;
  appendBatches?: AppendBatchCounts | undefined;
  appendQueue?: AppendQueueDepth | undefined;
  eventStreams?: EventStreamCounts | undefined;
  expensiveSlots?: SlotCounts | undefined;
  exportSlots?: SlotCounts | undefined;
} = {}): AppMetrics {
  const registry = new Registry();
  const registers = [registry];
  const http = registerRequestTally(registry, {
    counter: { name: 'http_requests_total', help: 'HTTP requests answered, by method, route template (`unmatched` when no route matched) and status.' },
    histogram: {
      name: 'http_request_duration_seconds',
      help: 'Time from receiving a request to the end of its response, by method, route template and status.',
      buckets: LATENCY_BUCKETS,
    },
  });
  const appends = {
    counts: registerAppendCounters(registry),
    stateBytes: registerLabelledHistogram(registry, {
      name: 'state_size_bytes',
      help: 'Serialized size of a state scope (session, user or app: what MAX_STATE_BYTES limits) after an append whose stateDelta touched it.',
      labelName: 'scope',
      buckets: STATE_BYTES_BUCKETS,
    }),
  };
  const stateAt: StateAtMetrics = {
    statementEvents: new Histogram({
      name: 'state_at_statement_events',
      help: 'Events folded by one statement of a state-at replay (a checkpoint step or the final fold); at most STATE_CHECKPOINT_INTERVAL each.',
      buckets: [0, 10, 100, 1000, 10_000, 100_000],
      registers,
    }),
    checkpointsWritten: new Counter({ name: 'state_checkpoints_written_total', help: 'Checkpoints of the session state written by state-at replays.', registers }),
  };
  if (pool) registerPoolGauges(registry, pool);
  if (appendBatches) registerAppendBatchCounters(registry, appendBatches);
  if (appendQueue) registerAppendQueueGauges(registry, appendQueue);
  if (eventStreams) registerEventStreamMetrics(registry, eventStreams);
  if (expensiveSlots) {
    registerSlotGauges(registry, expensiveSlots, {
      running: ['expensive_requests_running', 'Expensive requests (session lists, state-at, the reads of exports, import, appends with a large delta or a heavy answer) holding one of the LIST_CONCURRENCY slots.'],
      waiting: ['expensive_requests_waiting', 'Expensive requests waiting for a slot: the instance is full, their account holds its EXPENSIVE_PER_ACCOUNT share, or its time share (EXPENSIVE_SECONDS_PER_SECOND) is spent.'],
    });
  }
  if (exportSlots) {
    registerSlotGauges(registry, exportSlots, {
      running: ['exports_open', 'Exports open, from their first read to their last byte (at most LIST_CONCURRENCY, and half of it per account).'],
      waiting: ['exports_waiting', 'Exports waiting to open: the instance has LIST_CONCURRENCY open, their account half of it, or its time share (EXPENSIVE_SECONDS_PER_SECOND) is spent.'],
    });
  }

  const processes = processMetrics();
  return {
    http,
    appends,
    stateAt,
    contentType: registry.contentType,
    async render() {
      return (await registry.metrics()) + (await processes.metrics());
    },
  };
}

/** A counter whose value is read from `read` when scraped. */
function scrapedCounter(registry: Registry, name: string, help: string, read: () => number): void {
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

// Counted by the append route in plain numbers and read when scraped: a prom-client Counter with a
// label builds a hash string of its labels on every inc() (issue 24).
function registerAppendCounters(registry: Registry): AppendCounts {
  const counts: AppendCounts = { appended: 0, replayed: 0, eventsAppended: 0, eventsReplayed: 0, stateDeltaBytes: 0 };
  new Counter({
    name: 'append_requests_total',
    help: 'Successful appends: `appended` wrote at least one event, `replayed` was a pure retry that wrote nothing. Failures are in http_requests_total by status.',
    labelNames: ['outcome'],
    registers: [registry],
    collect() {
      this.reset();
      // A label set appears once an append of that outcome has been counted, as it did when inc() made it.
      if (counts.appended > 0) this.inc({ outcome: 'appended' }, counts.appended);
      if (counts.replayed > 0) this.inc({ outcome: 'replayed' }, counts.replayed);
    },
  });
  scrapedCounter(registry, 'events_appended_total', 'Events written to the history (replays excluded).', () => counts.eventsAppended);
  scrapedCounter(registry, 'events_replayed_total', 'Events answered from storage because their eventId was already stored (retries).', () => counts.eventsReplayed);
  scrapedCounter(registry, 'state_delta_bytes_total', 'Serialized (compact JSON, UTF-8) bytes of the stateDelta of every written event, as sent.', () => counts.stateDeltaBytes);
  return counts;
}

// Counted by the batcher in plain numbers and read when scraped: nothing on the append path.
function registerAppendBatchCounters(registry: Registry, counts: AppendBatchCounts): void {
  const counter = (name: string, help: string, read: () => number) => scrapedCounter(registry, name, help, read);
  counter('append_batches_total', 'Database calls that carried more than one append (group commit).', () => counts.batches);
  counter('append_batched_appends_total', 'Appends sent to the database in those calls.', () => counts.batchedAppends);
  counter(
    'append_batches_refused_whole_total',
    'Batches not written whole because one of their appends was refused (If-Match, the state limit, a stored eventId, a locked session), then sent again append by append.',
    () => counts.refusedWhole,
  );
  counter(
    'append_batch_reruns_total',
    'Appends of a batch that the batch did not write (a refusal, a stored eventId, a missing session, a lock conflict) and that were run again alone.',
    () => counts.rerunAlone,
  );
  counter('append_batch_calls_total', 'Calls sent from the batcher\'s slots (a batch, or one append that came alone), answered or failed.', () => counts.calls);
  counter(
    'append_batch_call_seconds_total',
    'Seconds those calls were out at the database, summed: ÷ append_batch_calls_total, the typical call; its rate, how busy the slots were (1 = a call out all the time).',
    () => counts.callSeconds,
  );
  new Counter({
    name: 'append_sent_alone_total',
    help: 'Appends sent to the database alone, never in a batch, by reason: shared_state (user: or app: keys, which every session of the user or space writes) or large_delta (over APPEND_ALONE_DELTA_BYTES).',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ reason: 'shared_state' }, counts.sentAlone.sharedState);
      this.inc({ reason: 'large_delta' }, counts.sentAlone.largeDelta);
    },
  });
}

function registerAppendQueueGauges(registry: Registry, queue: AppendQueueDepth): void {
  const gauge = (name: string, help: string, read: () => number) => scrapedGauge(registry, name, help, read);
  gauge('append_batch_waiting', 'Appends waiting for the next append call (group commit); a locked session\'s appends waiting in its own queue are not counted.', () => queue.appendsWaiting);
  gauge('append_batch_calls_out', 'Calls in the batcher\'s slots (a batch, or one append that came alone) sent to the database and not yet answered, at most APPEND_BATCH_CONCURRENCY; appends sent outside the slots (user: or app: state, a large delta, a locked session\'s queue) are not counted.', () => queue.callsOut);
}

function registerEventStreamMetrics(registry: Registry, counts: EventStreamCounts): void {
  new Gauge({
    name: 'event_streams_open',
    help: 'Event streams (GET …/events/stream) open on this instance.',
    registers: [registry],
    collect() {
      this.set(counts.open);
    },
  });
  new Counter({
    name: 'event_stream_reads_total',
    help: 'Event reads made for event streams: `shared` once per session per wake-up for all its streams, `catch_up` by one stream alone (its history, or after falling behind).',
    labelNames: ['kind'] as const,
    registers: [registry],
    collect() {
      this.reset();
      this.inc({ kind: 'shared' }, counts.sharedReads);
      this.inc({ kind: 'catch_up' }, counts.catchUpReads);
    },
  });
}

/** A gauge whose value is read when /metrics is scraped, so it costs nothing between scrapes. */
function scrapedGauge(registry: Registry, name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

/** A kind of shared slots (src/lib/account-slots.ts): its holders and its waiters, each a gauge [name, help]. */
function registerSlotGauges(registry: Registry, slots: SlotCounts, gauges: { running: [string, string]; waiting: [string, string] }): void {
  scrapedGauge(registry, ...gauges.running, () => slots.running);
  scrapedGauge(registry, ...gauges.waiting, () => slots.waiting);
}

// Read when scraped, so they cost nothing between scrapes.
function registerPoolGauges(registry: Registry, pool: PoolStats): void {
  const gauge = (name: string, help: string, read: () => number) => scrapedGauge(registry, name, help, read);
  gauge('db_pool_connections', 'Open database connections (idle + in use).', () => pool.totalCount);
  gauge('db_pool_connections_idle', 'Open database connections not serving a query.', () => pool.idleCount);
  gauge('db_pool_connections_in_use', 'Database connections checked out by a request or job.', () => pool.totalCount - pool.idleCount);
  gauge('db_pool_waiting_clients', 'Requests waiting for a free database connection; above 0 for long means the pool is too small.', () => pool.waitingCount);
  gauge('db_pool_max_connections', 'The configured pool size (DB_POOL_MAX; 1 on PGlite).', () => pool.options.max ?? 10);
}
