// The ceiling of issue 9: the least an append can cost PostgreSQL. A minimal schema (no account,
// no indexes beyond the keys, no foreign key) in a schema of its own inside the bench database, and
// the append as the issue defines it, run by pgbench with 32 clients: the four-statement
// transaction (BEGIN; UPDATE … RETURNING event_count; INSERT; COMMIT) and, for comparison, the
// same work as one statement (WITH s AS (UPDATE … RETURNING …) INSERT … SELECT FROM s).
//
// pgbench rather than a `pg` loop: it is the database's own load generator, so what it reaches is
// what PostgreSQL can do on this machine, with no client of ours in the way.
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type pg from 'pg';

export const MINIMAL_SCHEMA = 'minimal_append';
const SPACE = 'space-1';

const SCHEMA_SQL = `
  CREATE SCHEMA ${MINIMAL_SCHEMA};
  CREATE TABLE ${MINIMAL_SCHEMA}.sessions(space_id text, user_id text, session_id text, state jsonb not null default '{}',
    revision bigint not null default 0, event_count bigint not null default 0,
    update_time timestamptz not null default now(), primary key(space_id, user_id, session_id));
  CREATE TABLE ${MINIMAL_SCHEMA}.events(space_id text, user_id text, session_id text, seq bigint, event_id text not null,
    author text not null, content jsonb, state_delta jsonb, create_time timestamptz not null default now(),
    primary key(space_id, user_id, session_id, seq), unique(space_id, user_id, session_id, event_id));`;

// ~60 bytes of content, as in the issue.
const CONTENT = '{"role":"user","parts":[{"text":"the quick brown fox jumps over the dog"}]}';

/** pgbench's variables: a random session `i` of `sessions`, its user `u` (sessionsPerUser each). */
const pickSession = (sessions: number, sessionsPerUser: number) => `\\set i random(0, ${sessions - 1})\n\\set u :i / ${sessionsPerUser}\n`;
const KEY = `space_id = '${SPACE}' AND user_id = 'user-' || :u AND session_id = 'session-' || :i`;
const UPDATE = `UPDATE sessions SET state = state || jsonb_build_object('k', :i), revision = revision + 1, event_count = event_count + 1, update_time = now() WHERE ${KEY}`;

export const MINIMAL_SCRIPTS = {
  'minimal transaction (4 statements)': (sessions: number, perUser: number) =>
    pickSession(sessions, perUser) +
    'BEGIN;\n' +
    `${UPDATE} RETURNING event_count \\gset\n` +
    `INSERT INTO events VALUES ('${SPACE}', 'user-' || :u, 'session-' || :i, :event_count, gen_random_uuid()::text, 'user', '${CONTENT}', jsonb_build_object('k', :i));\n` +
    'COMMIT;\n',
  'minimal, one statement': (sessions: number, perUser: number) =>
    pickSession(sessions, perUser) +
    `WITH s AS (${UPDATE} RETURNING space_id, user_id, session_id, event_count) ` +
    `INSERT INTO events SELECT space_id, user_id, session_id, event_count, gen_random_uuid()::text, 'user', '${CONTENT}', jsonb_build_object('k', :i) FROM s;\n`,
} as const;

export type MinimalScript = keyof typeof MINIMAL_SCRIPTS;

/** Creates the minimal schema with `sessions` sessions (`sessionsPerUser` per user), all empty. */
export async function createMinimalSchema(pool: pg.Pool, sessions: number, sessionsPerUser: number): Promise<void> {
  await pool.query(SCHEMA_SQL);
  await pool.query(
    `INSERT INTO ${MINIMAL_SCHEMA}.sessions (space_id, user_id, session_id)
     SELECT $1, 'user-' || (g / $3), 'session-' || g FROM generate_series(0, $2 - 1) AS g`,
    [SPACE, sessions, sessionsPerUser],
  );
  await pool.query(`ANALYZE ${MINIMAL_SCHEMA}.sessions`);
}

export async function countMinimalEvents(pool: pg.Pool): Promise<number> {
  return Number((await pool.query(`SELECT count(*) AS n FROM ${MINIMAL_SCHEMA}.events`)).rows[0].n);
}

export interface PgbenchResult {
  transactions: number;
  failed: number;
  tps: number;
  latencyAverageMs: number;
}

/**
 * Runs `pgbench -n -c <clients> -j 2 -T <seconds> -f <script>` against the database of `url`,
 * with search_path set to the minimal schema, and parses its summary.
 */
export async function runPgbench(url: string, script: string, clients: number, seconds: number): Promise<PgbenchResult> {
  const parsed = new URL(url);
  const dir = await mkdtemp(join(tmpdir(), 'ass-pgbench-'));
  try {
    const file = join(dir, 'append.sql');
    await writeFile(file, script);
    const args = ['-n', '-c', String(clients), '-j', '2', '-T', String(seconds), '-f', file];
    args.push('-h', parsed.hostname || '127.0.0.1', '-p', parsed.port || '5432', '-U', decodeURIComponent(parsed.username || 'postgres'));
    args.push(decodeURIComponent(parsed.pathname.slice(1)));
    const env = { ...process.env, PGOPTIONS: `-c search_path=${MINIMAL_SCHEMA}`, PGAPPNAME: 'bench-pgbench' };
    if (parsed.password) Object.assign(env, { PGPASSWORD: decodeURIComponent(parsed.password) });
    const output = await new Promise<string>((resolve, reject) => {
      const child = spawn('pgbench', args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
      let text = '';
      child.stdout.on('data', (chunk: Buffer) => (text += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (text += chunk.toString()));
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve(text) : reject(new Error(`pgbench exited with ${code}:\n${text}`))));
    });
    const number = (pattern: RegExp) => {
      const match = pattern.exec(output);
      if (!match) throw new Error(`pgbench output without ${pattern}:\n${output}`);
      return Number(match[1]);
    };
    return {
      transactions: number(/number of transactions actually processed: (\d+)/),
      failed: /number of failed transactions: (\d+)/.test(output) ? number(/number of failed transactions: (\d+)/) : 0,
      tps: number(/tps = ([\d.]+)/),
      latencyAverageMs: number(/latency average = ([\d.]+) ms/),
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
