// An append on Citus is one call delegated whole to the worker holding the account's shard: the
// coordinator sends that worker one command (citus.log_remote_commands shows every command it
// sends), not one per statement of the function. The group commit does the same per account: the
// service's batcher finds Citus by itself and sends each batch, of one account's appends, as one
// delegated call of append_events_of_account (migrations/0011).
import pg from 'pg';
import type { JsonObject } from '../../src/db/schema.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAccountSlots } from '../../src/lib/account-slots.js';
import { AppendBatcher } from '../../src/modules/events/append-batcher.js';
import { insertSession } from '../support/fixtures.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => {
  await t?.close();
});

/** Runs `text` on a connection of its own and answers the commands the coordinator sent to other nodes meanwhile. */
async function remoteCommandsOf(text: string, values: unknown[]): Promise<string[]> {
  const client = new pg.Client({ connectionString: (t.database.pool as unknown as { options: { connectionString: string } }).options.connectionString });
  const logged: string[] = [];
  client.on('notice', (notice) => {
    if (/^issuing /.test(notice.message ?? '')) logged.push(notice.message!.replace(/^issuing /, ''));
  });
  await client.connect();
  try {
    await client.query('SET citus.log_remote_commands = on');
    await client.query('SET client_min_messages = log');
    await client.query(text, values);
  } finally {
    await client.end();
  }
  return logged;
}

const event = (author: string, delta: JsonObject) => ({
  eventId: `e-${Math.random().toString(36).slice(2)}`,
  author,
  payloadHash: '00',
  session: { delta, mode: 'merge-patch' as const },
});

describe('appends on Citus', () => {
  it('append_events is one command, sent to the worker of the account', async () => {
    const { accountId, defaultSpaceId } = t.account;
    await insertSession(t.db, { accountId, spaceId: defaultSpaceId, userId: 'u1', sessionId: 'delegated' });
    const commands = await remoteCommandsOf('SELECT * FROM append_events($1, $2, $3, $4, $5::jsonb, NULL, 1048576)', [
      accountId,
      defaultSpaceId,
      'u1',
      'delegated',
      JSON.stringify([event('user', { a: 1 }), event('model', { b: 2 })]),
    ]);
    expect(commands).toHaveLength(1);
    expect(commands[0]).toMatch(/SELECT .*append_events\('acct-/);
    const session = await t.db.selectFrom('sessions').select(['event_count', 'state']).where('session_id', '=', 'delegated').executeTakeFirstOrThrow();
    expect(session).toEqual({ event_count: 2, state: { a: 1, b: 2 } });
  });

  it('a batch of one account is one command too', async () => {
    const { accountId, defaultSpaceId } = t.account;
    for (const sessionId of ['b1', 'b2', 'b3']) await insertSession(t.db, { accountId, spaceId: defaultSpaceId, userId: 'u1', sessionId });
    const appends = ['b1', 'b2', 'b3'].map((sessionId) => ({ accountId, spaceId: defaultSpaceId, userId: 'u1', sessionId, events: [event('user', { s: sessionId })] }));
    const commands = await remoteCommandsOf('SELECT * FROM append_events_of_account($1, $2::jsonb, 1048576, 200)', [accountId, JSON.stringify(appends)]);
    expect(commands).toHaveLength(1);
    expect(commands[0]).toMatch(/append_events_of_account\('acct-/);
    const counts = await t.db.selectFrom('sessions').select(['session_id', 'event_count']).where('session_id', 'in', ['b1', 'b2', 'b3']).orderBy('session_id').execute();
    expect(counts.map((row) => row.event_count)).toEqual([1, 1, 1]);
  });

  it('the batcher finds Citus and batches per account: concurrent appends of two accounts all stored, in batches of one account', async () => {
    const other = await t.createAccount();
    const accounts = [t.account, other];
    const sessions = accounts.flatMap((account) => ['c1', 'c2', 'c3', 'c4'].map((sessionId) => ({ accountId: account.accountId, spaceId: account.defaultSpaceId, userId: 'u1', sessionId })));
    for (const key of sessions) await insertSession(t.db, key);
    const batcher = new AppendBatcher(t.db, {
      maxBatch: 32,
      concurrency: 1, // one call at a time, so that the others queue and batches form
      stateLimit: 1 << 20,
      lockWaitMs: 200,
      sessionQueueWaitMs: 10_000,
      aloneDeltaBytes: 1 << 20,
      expensiveSlots: createAccountSlots({ total: 2, perAccount: 1 }),
    });
    const rounds = 5;
    const answers = await Promise.all(
      Array.from({ length: rounds }, () => sessions.map((key) => batcher.append(key, [event('user', { n: 1 })], undefined))).flat(),
    );
    expect(batcher.scope).toBe('one-account');
    expect(answers.every((answer) => answer !== undefined)).toBe(true);
    expect(batcher.stats.batches).toBeGreaterThan(0);
    expect(batcher.stats.rerunAlone).toBe(0);
    const counts = await t.db.selectFrom('sessions').select('event_count').where('session_id', 'in', ['c1', 'c2', 'c3', 'c4']).execute();
    expect(counts.map((row) => row.event_count)).toEqual(Array(8).fill(rounds));
    // Every event is in a shard on a worker, with gap-free seq numbers per session.
    const seqs = await t.db.selectFrom('events').select(['account_id', 'session_id', 'seq']).where('session_id', 'in', ['c1', 'c2', 'c3', 'c4']).orderBy('account_id').orderBy('session_id').orderBy('seq').execute();
    expect(seqs).toHaveLength(8 * rounds);
    for (const key of sessions) {
      expect(seqs.filter((row) => row.account_id === key.accountId && row.session_id === key.sessionId).map((row) => row.seq)).toEqual([1, 2, 3, 4, 5]);
    }
  });
});
