// The pool as Kysely sees it, with one promise added: a connection whose state is not known is never
// handed out again, and a statement that should have committed on its own is answered only once the
// server said it did.
//
// Why: pg gives a query up after its client-side read timeout, but the statement stays in flight on
// the connection. Returned to the pool as it was, the connection could later sit inside a
// transaction whose BEGIN the server answered late (a stalled backend, a pooler queueing the BEGIN),
// and the next append on it would run inside that transaction: answered with its seq, never
// committed, rolled back when the server ends the idle transaction (issue 19). So each checkout is
// watched, and on release the connection is destroyed instead of kept when
// - a statement failed without a server's answer (read timeout, lost socket, protocol error),
// - a statement failed with 25P02 (it ran inside a transaction already aborted),
// - BEGIN, COMMIT or ROLLBACK failed, or
// - the server's last ReadyForQuery did not say "idle" (outside any transaction), or a statement
//   is still waiting for its answer.
// And a statement sent outside a transaction this checkout began must leave the connection idle:
// if the server says it is still inside a transaction, the statement did not commit, and the caller
// gets ConnectionStateError (unavailable, retry) instead of its rows.
import type { PostgresPool, PostgresPoolClient } from 'kysely';
import type pg from 'pg';
import type { FairCheckouts } from './fair-pool.js';
import { registeredStatementName } from './prepared-statements.js';
import { SQLSTATE } from './sqlstate.js';

/** A statement's answer came from a connection inside a transaction it did not begin: nothing it wrote is committed. */
export class ConnectionStateError extends Error {
  override name = 'ConnectionStateError';
  constructor() {
    super('The database connection was inside a transaction it did not begin; the statement did not commit.');
  }
}

// in_failed_sql_transaction: the connection carries an aborted transaction someone else began.
const FAILED_TRANSACTION = SQLSTATE.inFailedSqlTransaction;
// The statements Kysely sends to open and close a transaction ("rollback to <savepoint>" is not one).
const TRANSACTION_START = /^\s*(begin|start\s+transaction)\b/i;
const TRANSACTION_END = /^\s*(commit|end|abort|rollback)\s*(work|transaction)?\s*;?\s*$/i;

/** pg's client, with the two facts about its connection that pg tracks but does not type. */
type WatchedClient = pg.PoolClient & { readyForQuery?: boolean; getTransactionStatus?: () => string | null };

/** True while a statement sent on the connection has not been answered. */
export const hasUnansweredStatement = (client: pg.ClientBase): boolean => (client as WatchedClient).readyForQuery !== true;

/**
 * Resolves at the connection's next ReadyForQuery, or when it ends, errs or `READY_WAIT_MS` pass:
 * the server sends it right after an ErrorResponse, but pg may read the two in separate chunks (the
 * embedded database's socket server writes them one by one, from another thread). Whatever ends
 * the wait, release() then keeps the connection only if it is idle.
 */
function untilReadyForQuery(client: WatchedClient): Promise<void> {
  return new Promise((resolve) => {
    const connection = (client as unknown as pg.Client).connection;
    const events = ['readyForQuery', 'end', 'error'];
    const done = () => {
      clearTimeout(timer);
      for (const event of events) connection.off(event, done);
      resolve();
    };
    const timer = setTimeout(done, READY_WAIT_MS);
    for (const event of events) connection.once(event, done);
  });
}

/** The most a failed statement's answer waits for the ReadyForQuery behind its error. */
const READY_WAIT_MS = 1_000;

/** True when the server's last word was "idle, outside a transaction" and nothing is in flight. */
function isIdleConnection(client: pg.ClientBase): boolean {
  return !hasUnansweredStatement(client) && (client as WatchedClient).getTransactionStatus?.() === 'I';
}

export interface GuardedPoolOptions {
  /** Send the texts registered with preparedStatement() as named statements (prepared-statements.ts). */
  namedStatements: boolean;
  /** Each checkout first takes its account's turn here (fair-pool.ts); none: the pool's own queue alone. */
  checkouts?: FairCheckouts | undefined;
}

const nothingToGiveBack = () => {};

/** The pool, and views of it whose checkouts count against one account's share. */
export interface GuardedPool extends PostgresPool {
  /**
   * The same connections, each checkout taking `accountId`'s turn first (fair-pool.ts). Its end()
   * does nothing: the pool is ended through the pool itself.
   */
  forAccount(accountId: string): PostgresPool;
}

export function guardedPool(pool: pg.Pool, { namedStatements, checkouts }: GuardedPoolOptions): GuardedPool {
  // One watcher per pg client, reset at each checkout: Kysely keeps its connection objects by the
  // identity of what connect() returns. Shared by every account's view, as the named statements a
  // connection holds are.
  const watchers = new WeakMap<pg.PoolClient, CheckoutWatcher>();
  const checkOut = async (accountId: string | undefined): Promise<CheckoutWatcher> => {
    const giveBack = checkouts ? await checkouts.acquire(accountId) : nothingToGiveBack;
    let client: WatchedClient;
    try {
      client = (await pool.connect()) as WatchedClient;
    } catch (error) {
      giveBack();
      throw error;
    }
    let watcher = watchers.get(client);
    if (!watcher) watchers.set(client, (watcher = new CheckoutWatcher(client, namedStatements)));
    watcher.reset(giveBack);
    return watcher;
  };
  return {
    connect: () => checkOut(undefined),
    end: () => pool.end(),
    forAccount: (accountId) => ({ connect: () => checkOut(accountId), end: async () => {} }),
  };
}

class CheckoutWatcher implements PostgresPoolClient {
  private stateUnknown = false;
  private insideOwnTransaction = false;
  private giveBack: () => void = nothingToGiveBack;

  constructor(
    private readonly client: WatchedClient,
    private readonly namedStatements: boolean,
  ) {}

  reset(giveBack: () => void): void {
    this.stateUnknown = false;
    this.insideOwnTransaction = false;
    this.giveBack = giveBack;
  }

  // Kysely calls query(text, parameters) only; the overloads of PostgresPoolClient are its typing.
  query = (async (text: string, parameters?: readonly unknown[]) => {
    const control = TRANSACTION_START.test(text) || TRANSACTION_END.test(text);
    let result: pg.QueryResult;
    try {
      result = await this.send(text, parameters);
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (control || typeof code !== 'string' || code === FAILED_TRANSACTION) this.stateUnknown = true;
      // pg answers a server's error at its ErrorResponse, before the ReadyForQuery that follows it;
      // released then, the connection would look busy and be closed. Wait for the server's word.
      else if (hasUnansweredStatement(this.client)) await untilReadyForQuery(this.client);
      throw error;
    }
    if (control) this.insideOwnTransaction = TRANSACTION_START.test(text);
    else if (!this.insideOwnTransaction && this.client.getTransactionStatus?.() !== 'I') {
      this.stateUnknown = true;
      throw new ConnectionStateError();
    }
    return result;
  }) as unknown as PostgresPoolClient['query'];

  release(discard?: boolean): void {
    const giveBack = this.giveBack;
    this.giveBack = nothingToGiveBack;
    try {
      this.client.release(Boolean(discard) || this.stateUnknown || !isIdleConnection(this.client));
    } finally {
      giveBack();
    }
  }

  private send(text: string, parameters: readonly unknown[] | undefined): Promise<pg.QueryResult> {
    const name = this.namedStatements ? registeredStatementName(text) : undefined;
    const values = parameters as unknown[] | undefined;
    return name !== undefined ? this.client.query({ name, text, values }) : this.client.query(text, values);
  }
}
