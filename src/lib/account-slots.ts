// Slots shared fairly between accounts (issue 21): at most `total` tasks run at once, and at most
// `perAccount` of them for any one account, so one account's expensive requests (session lists,
// state at event N, export and import, appends with a large delta) can never hold every slot, and
// with them every pool connection the others' turns need. Waiting tasks start in arrival order,
// except that a task whose account is at its share lets the next account's task go first. Pure
// (no I/O).

export interface AccountSlots {
  /** Runs `task` once a slot is free for `accountId`; the slot is given back when it settles. */
  run<T>(accountId: string, task: () => Promise<T>): Promise<T>;
  /** Tasks running now and tasks waiting (for tests and metrics). */
  readonly running: number;
  readonly waiting: number;
}

interface Waiter {
  accountId: string;
  start: () => void;
}

export function createAccountSlots({ total, perAccount }: { total: number; perAccount: number }): AccountSlots {
  if (!Number.isInteger(total) || total < 1) throw new Error(`account slots need at least one slot, not ${total}`);
  if (!Number.isInteger(perAccount) || perAccount < 1) throw new Error(`an account needs at least one slot, not ${perAccount}`);
  let running = 0;
  const byAccount = new Map<string, number>();
  const queue: Waiter[] = [];
  const mayStart = (accountId: string) => running < total && (byAccount.get(accountId) ?? 0) < perAccount;
  const take = (accountId: string) => {
    running++;
    byAccount.set(accountId, (byAccount.get(accountId) ?? 0) + 1);
  };
  const release = (accountId: string) => {
    running--;
    const left = byAccount.get(accountId)! - 1;
    if (left === 0) byAccount.delete(accountId);
    else byAccount.set(accountId, left);
    // Start every waiter that fits now, oldest first (a release can free both kinds of room).
    for (let i = 0; i < queue.length && running < total; ) {
      const waiter = queue[i]!;
      if (!mayStart(waiter.accountId)) {
        i++;
        continue;
      }
      queue.splice(i, 1);
      take(waiter.accountId);
      waiter.start();
    }
  };
  return {
    async run<T>(accountId: string, task: () => Promise<T>): Promise<T> {
      if (mayStart(accountId)) take(accountId);
      else await new Promise<void>((start) => queue.push({ accountId, start }));
      try {
        return await task();
      } finally {
        release(accountId);
      }
    },
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
  };
}
