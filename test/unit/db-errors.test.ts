import { describe, expect, it } from 'vitest';
import { isDatabaseUnavailable, violatesUniqueKey } from '../../src/db/errors.js';
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
    // Seen on the Citus cluster (test/citus/): retried, each succeeds.
    ['Citus: a distributed deadlock broken', withCode('canceling the transaction since it was involved in a distributed deadlock', '40P01')],
    ['a serialization failure', withCode('could not serialize access due to concurrent update', '40001')],
    ['Citus: routed to a shard a split retired', withCode('could not find valid entry for shard 102134', 'XX000')],
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

describe('violatesUniqueKey', () => {
  const key = { constraint: 'events_account_id_space_id_user_id_session_id_event_id_key', columns: ['account_id', 'space_id', 'user_id', 'session_id', 'event_id'] };
  const violation = (fields: object) => Object.assign(withCode('duplicate key value violates unique constraint', '23505'), fields);

  it('recognises the key by its constraint on one PostgreSQL', () => {
    expect(violatesUniqueKey(violation({ constraint: key.constraint }), key)).toBe(true);
  });

  it("recognises it on a Citus shard, whose constraint name is shortened and suffixed, by the detail's columns", () => {
    const fromShard = violation({
      constraint: 'events_account_id_space_id_user_id_session_id_e_53204c41_102129',
      detail: 'Key (account_id, space_id, user_id, session_id, event_id)=(acct-1, space-1, u1, s3, e1) already exists.',
    });
    expect(violatesUniqueKey(fromShard, key)).toBe(true);
  });

  it('refuses another key, and other errors', () => {
    expect(violatesUniqueKey(violation({ constraint: 'events_pkey', detail: 'Key (account_id, space_id, user_id, session_id, seq)=(a, b, c, d, 1) already exists.' }), key)).toBe(false);
    expect(violatesUniqueKey(withCode('syntax error', '42601'), key)).toBe(false);
  });
});
