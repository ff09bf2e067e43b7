// Slots shared fairly between accounts: at most `total` holders at once, and at most `perAccount`
// of them for any one account, so that one account can never hold them all. Two kinds of slot are
// shared this way (docs/design.md §8): the expensive requests (session lists, state at event N,
// export and import, appends with a large delta) and the database pool's connections
// (db/fair-pool.ts).
//
// When a slot frees, the waiting account that holds the fewest slots goes first (the oldest of its
// waiters), so an account that asks rarely is served before one with a long queue, whatever their
// order of arrival; ties go to the oldest waiter. Work that belongs to no account (background
// tasks, batches of many accounts' appends) counts in the total but has no share to keep to.
//
// With a time share, holding a slot also costs the account time: each holding is charged its
// duration (at most `maxChargeSeconds`) against a budget that refills at `perSecond` seconds a
// second up to `burstSeconds`. An account whose budget is spent waits, however many slots are free,
// until it refills. A cap on concurrency alone does not bound what an account takes from the
// machine: one slot held back to back keeps a core busy, and faster answers only let a closed loop
// send more. The time share bounds the account's expensive work to a fraction of wall time, and a
// busy machine, where everything takes longer, makes it stricter by itself.
// Pure but for the clock and one timer (the wake-up of accounts waiting for their budget).

export interface AccountSlots {
  /** Runs `task` once a slot is free for `accountId`; the slot is given back when it settles. */
  run<T>(accountId: string, task: () => Promise<T>): Promise<T>;
  /**
   * Takes a slot for `accountId` (undefined: work of no account), waiting as long as it takes or
   * at most `timeoutMs`, after which it rejects with `timeoutError()`. The function it resolves to
   * gives the slot back; calling it again does nothing.
   */
  acquire(accountId: string | undefined, wait?: { timeoutMs: number; timeoutError: () => Error }): Promise<() => void>;
  /**
   * Charges `accountId` `seconds` of its time share (at most `maxChargeSeconds`) beyond its holding:
   * work its holding time does not show, done after the slot was given back. Nothing without a time share.
   */
  chargeExtra(accountId: string, seconds: number): void;
  /** Slots held now and holders waiting (for tests and metrics). */
  readonly running: number;
  readonly waiting: number;
}

/** The key of work that belongs to no account: it has no share to keep to. */
const NO_ACCOUNT = '\u0000';

interface Waiter {
  key: string;
  arrival: number;
  start: () => void;
}

/** Seconds of holding per second an account may use, with a burst, and the most one holding is charged. */
export interface TimeShare {
  perSecond: number;
  burstSeconds: number;
  maxChargeSeconds: number;
  /** Milliseconds (tests); default performance.now. */
  now?: () => number;
}

/** An account's budget of holding time: `seconds` left at the moment `at` (ms). */
interface Budget {
  seconds: number;
  at: number;
}

/** Budgets kept before the full ones are forgotten (a full budget is the default). */
const BUDGETS_KEPT = 1_000;

export function createAccountSlots({ total, perAccount, timeShare }: { total: number; perAccount: number; timeShare?: TimeShare | undefined }): AccountSlots {
  if (!Number.isInteger(total) || total < 1) throw new Error(`account slots need at least one slot, not ${total}`);
  if (!Number.isInteger(perAccount) || perAccount < 1) throw new Error(`an account needs at least one slot, not ${perAccount}`);
  if (timeShare && !(timeShare.perSecond > 0 && timeShare.burstSeconds > 0 && timeShare.maxChargeSeconds > 0)) {
    throw new Error('a time share needs a positive rate, burst and charge cap');
  }
  const now = timeShare?.now ?? (() => performance.now());
  const budgets = new Map<string, Budget>();
  /** The budget of `key` now: what was left, refilled since, at most the burst. */
  const budgetOf = (key: string, at: number): number => {
    const budget = budgets.get(key);
    if (!timeShare || !budget) return timeShare?.burstSeconds ?? Infinity;
    return Math.min(timeShare.burstSeconds, budget.seconds + ((at - budget.at) / 1000) * timeShare.perSecond);
  };
  /** Takes `seconds` (at most maxChargeSeconds) from the budget of `key`, as of `at`. */
  const spend = (key: string, seconds: number, at = now()) => {
    if (!timeShare || key === NO_ACCOUNT) return;
    budgets.set(key, { seconds: budgetOf(key, at) - Math.min(timeShare.maxChargeSeconds, seconds), at });
    if (budgets.size > BUDGETS_KEPT) {
      for (const [other] of budgets) if (budgetOf(other, at) >= timeShare.burstSeconds && !held.has(other)) budgets.delete(other);
    }
  };
  /** Charges a holding that began at `startedAt` its duration. */
  const charge = (key: string, startedAt: number) => {
    if (!timeShare) return;
    const at = now();
    spend(key, (at - startedAt) / 1000, at);
  };
  const inBudget = (key: string) => !timeShare || key === NO_ACCOUNT || budgetOf(key, now()) > 0;
  let running = 0;
  let waiting = 0;
  let arrivals = 0;
  const held = new Map<string, number>();
  /** Each waiting account's waiters, oldest first. */
  const queues = new Map<string, Waiter[]>();
  const heldBy = (key: string) => held.get(key) ?? 0;
  const withinShare = (key: string) => key === NO_ACCOUNT || (heldBy(key) < perAccount && inBudget(key));
  const take = (key: string) => {
    running++;
    held.set(key, heldBy(key) + 1);
  };
  const next = (): Waiter | undefined => {
    let best: Waiter | undefined;
    for (const [key, queue] of queues) {
      if (!withinShare(key)) continue;
      const head = queue[0]!;
      if (!best || heldBy(key) < heldBy(best.key) || (heldBy(key) === heldBy(best.key) && head.arrival < best.arrival)) best = head;
    }
    return best;
  };
  const dequeue = (waiter: Waiter) => {
    const queue = queues.get(waiter.key);
    const at = queue?.indexOf(waiter) ?? -1;
    if (!queue || at < 0) return false;
    queue.splice(at, 1);
    if (queue.length === 0) queues.delete(waiter.key);
    waiting--;
    return true;
  };
  let wakeUp: NodeJS.Timeout | undefined;
  /** Starts whoever fits now; then, if an account still waits only for its budget, wakes up when it refills. */
  const dispatch = () => {
    for (let waiter = running < total ? next() : undefined; waiter; waiter = running < total ? next() : undefined) {
      dequeue(waiter);
      take(waiter.key);
      waiter.start();
    }
    if (!timeShare || wakeUp || running >= total) return;
    const at = now();
    let soonest = Infinity;
    for (const key of queues.keys()) {
      if (heldBy(key) < perAccount) soonest = Math.min(soonest, (-budgetOf(key, at) / timeShare.perSecond) * 1000);
    }
    if (soonest === Infinity) return;
    wakeUp = setTimeout(() => {
      wakeUp = undefined;
      dispatch();
    }, Math.max(1, Math.ceil(soonest) + 1));
    wakeUp.unref();
  };
  const release = (key: string, startedAt: number) => {
    running--;
    const left = heldBy(key) - 1;
    if (left === 0) held.delete(key);
    else held.set(key, left);
    charge(key, startedAt);
    // A release frees room in the total and in one account's share: start whoever fits now.
    dispatch();
  };
  const acquire: AccountSlots['acquire'] = async (accountId, wait) => {
    const key = accountId ?? NO_ACCOUNT;
    if (running < total && withinShare(key) && !queues.has(key)) take(key);
    else {
      await new Promise<void>((resolve, reject) => {
        const waiter: Waiter = { key, arrival: arrivals++, start: resolve };
        if (wait) {
          const timer = setTimeout(() => dequeue(waiter) && reject(wait.timeoutError()), wait.timeoutMs);
          waiter.start = () => {
            clearTimeout(timer);
            resolve();
          };
        }
        const queue = queues.get(key);
        if (queue) queue.push(waiter);
        else queues.set(key, [waiter]);
        waiting++;
        // Free slots and a spent budget: nothing releases a slot to start this waiter, the clock does.
        dispatch();
      });
    }
    const startedAt = now();
    let given = false;
    return () => {
      if (given) return;
      given = true;
      release(key, startedAt);
    };
  };
  return {
    async run<T>(accountId: string, task: () => Promise<T>): Promise<T> {
      const giveBack = await acquire(accountId);
      try {
        return await task();
      } finally {
        giveBack();
      }
    },
    acquire,
    chargeExtra(accountId, seconds) {
      if (seconds > 0) spend(accountId, seconds);
    },
    get running() {
      return running;
    },
    get waiting() {
      return waiting;
    },
  };
}
