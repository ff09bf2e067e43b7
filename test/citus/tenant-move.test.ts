// An account outgrows its shard (docs/scale-out.md §4): it is isolated to a shard of its own
// (isolate_tenant_to_new_shard, CASCADE: its spaces, users, sessions, events and checkpoints
// together), and that shard is moved to the other worker (citus_move_shard_placement), while agents
// keep appending to it and to another account. Every append is answered 201 and stored once, at the
// seq it was acknowledged with: 0 failed, 0 lost.
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/test-app.js';
import type { CreatedAccount } from '../../src/modules/accounts/accounts.service.js';

let t: TestApp;
/** The app's error log lines, so that a failed append's message can say what the database answered. */
const errorLines: string[] = [];
beforeAll(async () => {
  const logger = pino({ level: 'error' }, { write: (line: string) => void errorLines.push(line) });
  t = await createTestApp({ poolMax: 12, logger });
});
afterAll(async () => {
  await t?.close();
});

interface Placement {
  shardid: number;
  nodeport: number;
  shard_count: number;
}

/** The shard of `sessions` holding the account, its node, and how many accounts share the shard's hash range. */
async function placementOf(accountId: string): Promise<Placement> {
  const { rows } = await sql<Placement>`
    SELECT s.shardid, s.nodeport, (SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'sessions'::regclass)::int AS shard_count
    FROM citus_shards s
    WHERE s.shardid = get_shard_id_for_distribution_column('sessions', ${accountId}::text) AND s.table_name = 'sessions'::regclass`.execute(t.db);
  return rows[0]!;
}

/** What the cluster is doing, for the failure messages. */
let phase = 'before';

/** Appends to `sessions` of `account` one after another until stopped; answers what each append was acknowledged with. */
function agent(account: CreatedAccount, sessionId: string) {
  const acknowledged: { seq: number; eventId: string }[] = [];
  const failures: string[] = [];
  let running = true;
  const base = `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions/${sessionId}`;
  const done = (async () => {
    expect((await t.request({ method: 'POST', url: `/v1/spaces/${account.defaultSpaceId}/users/u1/sessions`, token: account.rootCredential.token, payload: { sessionId } })).statusCode).toBe(201);
    for (let i = 0; running; i++) {
      const eventId = `${sessionId}-${i}`;
      const res = await t.request({ method: 'POST', url: `${base}/events`, token: account.rootCredential.token, payload: { eventId, author: 'user', actions: { stateDelta: { last: i } } } });
      if (res.statusCode === 201) acknowledged.push({ seq: res.json().events[0].seq, eventId });
      else {
        const logged = errorLines.find((line) => line.includes(res.headers['x-request-id'] as string));
        failures.push(`${phase}: ${res.statusCode} ${res.body} ${logged ? (JSON.parse(logged) as { err?: { message?: string } }).err?.message : ''}`);
      }
    }
  })();
  return {
    acknowledged,
    failures,
    async stop() {
      running = false;
      await done;
    },
  };
}

/** Isolates the account to a shard of its own, then moves that shard to the other worker. */
async function moveWhileAppending(big: CreatedAccount): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 300));
  const before = await placementOf(big.accountId);
  phase = 'isolating';
  await sql`SELECT isolate_tenant_to_new_shard('sessions', ${big.accountId}::text, 'CASCADE', shard_transfer_mode => 'block_writes')`.execute(t.db);
  phase = 'isolated';
  const isolated = await placementOf(big.accountId);
  expect(isolated.shardid).not.toBe(before.shardid);
  expect(isolated.shard_count).toBe(before.shard_count + 2); // the range split in three: below, the account, above
  await new Promise((resolve) => setTimeout(resolve, 300));

  const { rows: nodes } = await sql<{ nodeport: number }>`SELECT nodeport FROM pg_dist_node WHERE groupid <> 0 ORDER BY nodeport`.execute(t.db);
  const target = nodes.find((node) => node.nodeport !== isolated.nodeport)!.nodeport;
  phase = 'moving';
  await sql`SELECT citus_move_shard_placement(${isolated.shardid}::bigint, '127.0.0.1', ${isolated.nodeport}::int, '127.0.0.1', ${target}::int, shard_transfer_mode => 'force_logical')`.execute(
    t.db,
  );
  phase = 'moved';
  const moved = await placementOf(big.accountId);
  expect(moved).toMatchObject({ shardid: isolated.shardid, nodeport: target });
  await new Promise((resolve) => setTimeout(resolve, 300));
}

describe('an account isolated to a shard of its own and moved to the other worker, with appends running', () => {
  it('answers every append and loses none', async () => {
    const big = t.account;
    const neighbour = await t.createAccount();
    const agents = [agent(big, 'a1'), agent(big, 'a2'), agent(neighbour, 'n1')];
    try {
      await moveWhileAppending(big);
    } finally {
      for (const running of agents) await running.stop();
    }

    for (const running of agents) expect(running.failures).toEqual([]);
    // Each acknowledged append is stored once, at the seq it was acknowledged with, gap-free.
    for (const [account, sessionId, running] of [[big, 'a1', agents[0]!], [big, 'a2', agents[1]!], [neighbour, 'n1', agents[2]!]] as const) {
      expect(running.acknowledged.length).toBeGreaterThan(3);
      const stored = await t.db
        .selectFrom('events')
        .select(['seq', 'event_id'])
        .where('account_id', '=', account.accountId)
        .where('session_id', '=', sessionId)
        .orderBy('seq')
        .execute();
      expect(stored.map((row) => ({ seq: row.seq, eventId: row.event_id }))).toEqual(running.acknowledged);
      expect(stored.map((row) => row.seq)).toEqual(stored.map((_, i) => i + 1));
    }
  });
});
