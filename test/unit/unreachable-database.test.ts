// The one-line reasons for the failures a test server cannot easily give (a wrong password needs a
// server that checks passwords; a host with several addresses); test/integration/startup-errors.test.ts
// has the real refused connection, DNS failure, timeout, unknown database and unknown user.
import { describe, expect, it } from 'vitest';
import { describeDatabaseFailure, withoutPasswords } from '../../src/db/unreachable-database.js';

const target = { variable: 'DATABASE_URL', url: 'postgres://svc:hunter2@db.internal:6543/sessions' } as const;
const withCode = (code: string, message = 'failed') => Object.assign(new Error(message), { code });

describe('describeDatabaseFailure', () => {
  it('a wrong password: names the user, never the password', () => {
    const line = describeDatabaseFailure(withCode('28P01', 'password authentication failed for user "svc"'), target);
    expect(line).toBe('PostgreSQL at db.internal:6543 refused the password of user "svc": check DATABASE_URL.');
  });

  it('a refused connection inside an AggregateError (one error per address of the host)', () => {
    const error = new AggregateError([withCode('ECONNREFUSED'), withCode('ECONNREFUSED')], 'connect failed');
    expect(describeDatabaseFailure(error, target)).toBe('Cannot reach PostgreSQL at db.internal:6543 (connection refused): check DATABASE_URL, or start PostgreSQL.');
  });

  it('the default port and database when the URL leaves them out', () => {
    expect(describeDatabaseFailure(withCode('3D000'), { variable: 'DATABASE_DIRECT_URL', url: 'postgres://app@db' })).toBe(
      'PostgreSQL at db:5432 has no database "app": create it, or check DATABASE_DIRECT_URL.',
    );
  });

  it('leaves other errors to the caller', () => {
    expect(describeDatabaseFailure(withCode('42P01', 'relation "x" does not exist'), target)).toBeUndefined();
    expect(describeDatabaseFailure('not an error', target)).toBeUndefined();
  });
});

describe('withoutPasswords', () => {
  it('removes each URL\'s password, as written and decoded', () => {
    const urls = ['postgres://svc:p%40ss@db/x', undefined, 'postgres://nopass@db/x'];
    expect(withoutPasswords('auth p@ss and p%40ss failed', urls)).toBe('auth *** and *** failed');
  });
});
