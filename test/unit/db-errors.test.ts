import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable } from '../../src/db/errors.js';
import { ConnectionStateError } from '../../src/db/guarded-pool.js';

const withCode = (message: string, code: string) => Object.assign(new Error(message), { code });

describe('isDatabaseUnavailable', () => {
  // Each of these was seen by the restart test (fault-restart.test.ts) or comes from pg's timeouts.
  it.each([
    ['refused connect', withCode('connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED')],
    ['reset socket', withCode('read ECONNRESET', 'ECONNRESET')],
    ['server starting up', withCode('the database system is starting up', '57P03')],
    ['server shutting down', withCode('terminating connection due to administrator command', '57P01')],
    ['idle-in-transaction timeout', withCode('terminating connection due to idle-in-transaction timeout', '25P03')],
    ['statement timeout', withCode('canceling statement due to statement timeout', '57014')],
    ['a connection left in an aborted transaction', withCode('current transaction is aborted, commands ignored until end of transaction block', '25P02')],
    ['a statement that ran inside a transaction it did not begin', new ConnectionStateError()],
    ['refused at connect', Object.assign(withCode('database "x" is not currently accepting connections', '55000'), { severity: 'FATAL' })],
    ['socket closed under a query', new Error('Connection terminated unexpectedly')],
    ['broken client asked for ROLLBACK', new Error('Client has encountered a connection error and is not queryable')],
    ['closed client', new Error('Client was closed and is not queryable')],
    ['pg query_timeout', new Error('Query read timeout')],
    ['pool connect timeout', new Error('timeout exceeded when trying to connect')],
    ['every address refused', new AggregateError([withCode('connect ECONNREFUSED ::1:5432', 'ECONNREFUSED')], 'connect failed')],
    ['wrapped', new Error('append failed', { cause: withCode('x', '08006') })],
  ])('%s → unavailable', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ['unique violation', withCode('duplicate key value violates unique constraint', '23505')],
    ['syntax error', withCode('syntax error at or near "x"', '42601')],
    ['a bug', new TypeError("Cannot read properties of undefined (reading 'seq')")],
    ['not an error', 'ECONNREFUSED'],
  ])('%s → not unavailable', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });
});
