// The embedded database's autovacuum (src/db/embedded-vacuum.ts): PGlite never vacuums or analyzes
// on its own, so the embedded server applies autovacuum's thresholds itself. Run on both backends:
// the rules read PostgreSQL's own statistics, which PGlite keeps as PostgreSQL does.
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findDueTables, startEmbeddedVacuum, vacuumDueTables } from '../../src/db/embedded-vacuum.js';
import { insertSession } from '../support/fixtures.js';
import { untilValue } from '../support/poll.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
});
afterAll(async () => t.close());

interface TableStats {
  n_dead_tup: number;
  /** Rows updated since the statistics began (n_tup_upd): it only grows. */
  updates: number;
  n_mod_since_analyze: number;
  vacuums: number;
  analyzes: number;
}

async function statsOf(table: string): Promise<TableStats> {
  const { rows } = await sql<TableStats>`
    SELECT n_dead_tup::int, n_tup_upd::int AS updates, n_mod_since_analyze::int, vacuum_count::int AS vacuums, analyze_count::int AS analyzes
    FROM pg_stat_user_tables WHERE relname = ${table} AND schemaname = current_schema()`.execute(t.db);
  return rows[0]!;
}

/** Statistics reach pg_stat_user_tables when the writing backend next reports them (up to ~10 s on PostgreSQL). */
const untilStats = <T>(read: () => Promise<T>, done: (value: T) => boolean, what: string) =>
  untilValue(read, done, what, { timeoutMs: 20_000, intervalMs: 100 });

/**
 * Waits until `count` more updates of sessions than in `since` are counted. Each leaves a dead row
 * version, but n_dead_tup is no count of them: on-access pruning takes dead versions off it before
 * any VACUUM (CI runs saw 89 of 100 and 247 of 300). The count of updates only grows.
 */
const untilSessionUpdatesCounted = (since: TableStats, count: number) =>
  untilStats(() => statsOf('sessions'), (stats) => stats.updates >= since.updates + count, `${count} session updates to be counted`);

/** A new session with `appends` one-event appends: each leaves a dead sessions row behind. */
async function sessionWithAppends(appends: number): Promise<void> {
  const key = { accountId: t.account.accountId, spaceId: t.account.defaultSpaceId, userId: 'vacuum-user', sessionId: `s-${randomUUID()}` };
  await insertSession(t.db, key);
  const url = `/v1/spaces/${key.spaceId}/users/${key.userId}/sessions/${key.sessionId}/events`;
  for (let n = 0; n < appends; n++) {
    const res = await t.request({ method: 'POST', url, payload: { author: 'user', actions: { stateDelta: { turn: n } } } });
    expect(res.statusCode).toBe(201);
  }
}

describe('the embedded database vacuum', () => {
  it('vacuums the tables past autovacuum’s dead-row threshold and analyzes those past its change threshold, then finds them done', async () => {
    const fresh = await statsOf('sessions');
    await sessionWithAppends(300);
    await untilSessionUpdatesCounted(fresh, 300);
    await untilStats(() => statsOf('events'), (stats) => stats.n_mod_since_analyze >= 300, 'the inserted events to be counted');

    const due = await findDueTables(t.db);
    expect(due).toContainEqual({ table: 'sessions', vacuum: true });
    // 300 inserted events, no dead ones: past the analyze threshold, not the vacuum thresholds.
    expect(due.find((entry) => entry.table === 'events')).toEqual({ table: 'events', vacuum: false });

    const before = { sessions: await statsOf('sessions'), events: await statsOf('events') };
    const timeoutBefore = (await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(t.db)).rows[0]!.statement_timeout;
    expect(await vacuumDueTables(t.db)).toEqual(due);

    const sessions = await untilStats(() => statsOf('sessions'), (stats) => stats.vacuums > before.sessions.vacuums, 'the VACUUM of sessions to be counted');
    expect(sessions.n_dead_tup).toBeLessThan(50);
    expect(sessions.analyzes).toBeGreaterThan(before.sessions.analyzes);
    const events = await untilStats(() => statsOf('events'), (stats) => stats.analyzes > before.events.analyzes, 'the ANALYZE of events to be counted');
    expect(events.vacuums).toBe(before.events.vacuums);
    expect(events.n_mod_since_analyze).toBe(0);

    // Nothing is due any more, and the connection's statement timeout is what it was.
    const again = await findDueTables(t.db);
    expect(again.map((entry) => entry.table)).not.toContain('sessions');
    expect(again.map((entry) => entry.table)).not.toContain('events');
    expect((await sql<{ statement_timeout: string }>`SHOW statement_timeout`.execute(t.db)).rows[0]!.statement_timeout).toBe(timeoutBefore);
  });

  it('runs on its timer until stopped, and logs what it did', async () => {
    const logged: { fields: object; message: string }[] = [];
    const log = (fields: object, message: string) => logged.push({ fields, message });
    const logger = { debug: log, info: log, error: log };
    const before = await statsOf('sessions');
    const vacuum = startEmbeddedVacuum(t.db, { intervalMs: 50, logger });
    try {
      await sessionWithAppends(200);
      await untilStats(() => statsOf('sessions'), (stats) => stats.vacuums > before.vacuums, 'the timer to vacuum sessions');
    } finally {
      await vacuum.stop();
    }
    expect(logged.filter((entry) => entry.message === 'embedded database maintenance failed')).toEqual([]);
    expect(logged.some((entry) => entry.message === 'embedded database maintained' && (entry.fields as { vacuumed: string[] }).vacuumed.includes('sessions'))).toBe(true);

    // Stopped: more dead rows stay until the next start.
    const stopped = await statsOf('sessions');
    await sessionWithAppends(100);
    await untilSessionUpdatesCounted(stopped, 100);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await statsOf('sessions')).vacuums).toBe(stopped.vacuums);
  });
});
