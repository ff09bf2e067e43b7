// Which account the code running now works for, carried along the async calls of a request
// (AsyncLocalStorage), so that the database pool can share its connections fairly between accounts
// (db/fair-pool.ts) without every service and repository passing the account down to the pool.
// One carrier per process: it holds no state of its own, only what each request's context holds,
// so several apps in one process (the tests) do not see each other's accounts.
import { AsyncLocalStorage } from 'node:async_hooks';

const scope = new AsyncLocalStorage<string | undefined>();

/** Runs `work` (and everything it starts) on behalf of `accountId`. */
export const runForAccount = <T>(accountId: string, work: () => T): T => scope.run(accountId, work);

/**
 * Runs `work` on behalf of no account: shared work started from inside a request (a batch of many
 * accounts' appends, the event streams' heartbeat) is not counted against that request's account.
 * A scope of its own whose account is undefined, rather than AsyncLocalStorage.exit(): on Node 20
 * exit() turns the storage off and on again around `work`, which removes and reinstalls the promise
 * hooks of the whole process once per group-commit call.
 */
export const runForNoAccount = <T>(work: () => T): T => scope.run(undefined, work);

/** The account the current work is for, or undefined outside any request. */
export const currentAccount = (): string | undefined => scope.getStore();
