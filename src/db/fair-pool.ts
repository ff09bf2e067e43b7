// The database pool's connections shared fairly between accounts (docs/design.md §8): a request's
// checkout counts against the account it works for (the handle of its account, connect.ts
// accountDatabasesOf, which a request's handlers are given: http/account-database.ts), which may hold at most
// `perAccount` of the pool's `total` connections at once; past that its checkouts wait in a queue
// of their own, not in the pool's single first-come queue. So an account whose requests are slow
// (long statements, row locks) fills only its own share, and the connections left over serve the
// other accounts' turns at once, instead of after every queued request of the slow one (a 503
// ResourceUnavailable.Database once the checkout timed out). When a connection frees, the waiting
// account holding the fewest goes first. Work of no account (start-up, background jobs, a batch
// of several accounts' appends) has no share to keep to.
import { type AccountSlots, createAccountSlots } from '../lib/account-slots.js';

/** No connection came free for this account within the checkout timeout: retry later (503). */
export class PoolCheckoutTimeout extends Error {
  override name = 'PoolCheckoutTimeout';
  constructor(timeoutMs: number) {
    super(`No database connection came free within ${timeoutMs} ms (the pool is full, or this account holds its share of it).`);
  }
}

export interface FairCheckouts {
  /** Waits for the account's turn at the pool (undefined: work of no account); the function it resolves to gives it back. */
  acquire(accountId: string | undefined): Promise<() => void>;
  /** Connections held through it, and checkouts waiting for one. */
  readonly running: number;
  readonly waiting: number;
}

/** `timeoutMs` undefined: a checkout waits as long as it takes (the embedded database's one connection). */
export function fairCheckouts({ total, perAccount, timeoutMs }: { total: number; perAccount: number; timeoutMs: number | undefined }): FairCheckouts {
  const slots: AccountSlots = createAccountSlots({ total, perAccount: Math.min(total, perAccount) });
  const wait = timeoutMs === undefined ? undefined : { timeoutMs, timeoutError: () => new PoolCheckoutTimeout(timeoutMs) };
  return {
    acquire: (accountId) => slots.acquire(accountId, wait),
    get running() {
      return slots.running;
    },
    get waiting() {
      return slots.waiting;
    },
  };
}

/** The default share of one account: all but two connections (at least one), the two kept for the others' turns. */
export const defaultPoolPerAccount = (poolMax: number): number => Math.max(1, poolMax - 2);
