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
// Pure (no I/O).

export interface AccountSlots {
  /** Runs `task` once a slot is free for `accountId`; the slot is given back when it settles. */
  run<T>(accountId: string, task: () => Promise<T>): Promise<T>;
  /**
   * Takes a slot for `accountId` (undefined: work of no account), waiting as long as it takes or
   * at most `timeoutMs`, after which it rejects with `timeoutError()`. The function it resolves to
   * gives the slot back; calling it again does nothing.
   */
  acquire(accountId: string | undefined, wait?: { timeoutMs: number; timeoutError: () => Error }): Promise<() => void>;
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

export function createAccountSlots({ total, perAccount }: { total: number; perAccount: number }): AccountSlots {
  if (!Number.isInteger(total) || total < 1) throw new Error(`account slots need at least one slot, not ${total}`);
  if (!Number.isInteger(perAccount) || perAccount < 1) throw new Error(`an account needs at least one slot, not ${perAccount}`);
  let running = 0;
  let waiting = 0;
  let arrivals = 0;
  const held = new Map<string, number>();
  /** Each waiting account's waiters, oldest first. */
  const queues = new Map<string, Waiter[]>();
  const heldBy = (key: string) => held.get(key) ?? 0;
  const withinShare = (key: string) => key === NO_ACCOUNT || heldBy(key) < perAccount;
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
  const release = (key: string) => {
    running--;
    const left = heldBy(key) - 1;
    if (left === 0) held.delete(key);
    else held.set(key, left);
    // A release frees room in the total and in one account's share: start whoever fits now.
    for (let waiter = running < total ? next() : undefined; waiter; waiter = running < total ? next() : undefined) {
      dequeue(waiter);
      take(waiter.key);
      waiter.start();
    }
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
      });
    }
    let given = false;
    return () => {
      if (given) return;
      given = true;
      release(key);
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
    get running() {
      return running;
    },
    get waiting() {
      return waiting;
    },
  };
}
