// Two instances of an ADK application — two real processes, each a Runner on AdkSessionService —
// start at once on a new appName (both create its space and the session: one of each results) and
// run turns on that ONE session at the same time. Nothing is lost: every turn's events are stored once,
// seq is gap-free and is the order, each turn's events keep their causal order, and the state every
// turn's tool wrote under its own key is there.
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AdkSessionService } from '../../clients/typescript/src/adk.js';
import { createTestApp, type TestApp } from '../support/test-app.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const LOOPS = 2; // concurrent turn loops per process
const TURNS = 5; // turns per loop
const EVENTS_PER_TURN = 4; // user message, function call, function response, answer

let t: TestApp;
let baseUrl: string;
const children: ChildProcess[] = [];
beforeAll(async () => {
  t = await createTestApp();
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  await t?.close();
});

interface RunnerProcess {
  child: ChildProcess;
  ready: Promise<void>;
  result: Promise<{ tag: string; appended: { invocationId: string; eventIds: string[] }[] }>;
}

function startRunnerProcess(env: Record<string, string>): RunnerProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/support/adk-runner-process.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  children.push(child);
  let stdout = '';
  let stderr = '';
  let markReady: () => void;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  child.stdout!.on('data', (chunk: Buffer) => {
    stdout += chunk.toString();
    if (stdout.startsWith('ready\n')) markReady();
  });
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const result = new Promise<RunnerProcess['result'] extends Promise<infer R> ? R : never>((resolve, reject) =>
    child.once('close', (code) => {
      const last = stdout.trim().split('\n').at(-1) ?? '';
      if (code === 0 && last.startsWith('{')) resolve(JSON.parse(last));
      else reject(new Error(`runner process exited with ${code}:\n${stdout}\n${stderr}`));
    }),
  );
  return { child, ready, result };
}

describe('two ADK Runner processes on one session', () => {
  it('create one space and session between them, append at the same time and lose nothing: seq decides the order', async () => {
    const appName = `adk-processes-${process.pid}`;
    const userId = 'shared-user';
    const service = new AdkSessionService({ baseUrl, credential: t.account.rootCredential.token });
    const sessionId = 'shared-session';
    const env = { ADK_BASE_URL: baseUrl, ADK_CREDENTIAL: t.account.rootCredential.token, ADK_APP: appName, ADK_USER: userId, ADK_SESSION: sessionId, ADK_LOOPS: String(LOOPS), ADK_TURNS: String(TURNS) };

    const runners = ['alpha', 'beta'].map((tag) => startRunnerProcess({ ...env, ADK_TAG: tag }));
    await Promise.all(runners.map((runner) => runner.ready));
    for (const runner of runners) runner.child.stdin!.write('go\n');
    const results = await Promise.all(runners.map((runner) => runner.result));

    // Both processes used a new appName at once: one space, one session.
    const spaces = await t.db.selectFrom('session_spaces').select('space_id').where('account_id', '=', t.account.accountId).where('name', '=', appName).execute();
    expect(spaces).toHaveLength(1);
    const sessions = await t.db.selectFrom('sessions').select('space_id').where('account_id', '=', t.account.accountId).where('session_id', '=', sessionId).execute();
    expect(sessions).toEqual([{ space_id: spaces[0]!.space_id }]);

    const total = 2 * LOOPS * TURNS * EVENTS_PER_TURN;
    const session = await service.getSession({ appName, userId, sessionId });
    const rows = await t.db
      .selectFrom('events')
      .select(['seq', 'event_id', 'invocation_id', 'author'])
      .where('account_id', '=', t.account.accountId)
      .where('session_id', '=', sessionId)
      .orderBy('seq')
      .execute();
    expect(rows.map((row) => row.seq)).toEqual(Array.from({ length: total }, (_, i) => i + 1));
    expect(session!.events.map((event) => event.id)).toEqual(rows.map((row) => row.event_id));

    // Every turn of both processes is there, once, in its own causal order.
    const seqOf = new Map(rows.map((row) => [row.event_id, row.seq]));
    const turns = results.flatMap((result) => result.appended);
    expect(turns).toHaveLength(2 * LOOPS * TURNS);
    for (const turn of turns) {
      const ofTurn = rows.filter((row) => row.invocation_id === turn.invocationId);
      expect(ofTurn.map((row) => row.author)).toEqual(['user', 'assistant', 'assistant', 'assistant']);
      expect(turn.eventIds.map((id) => seqOf.get(id))).toEqual(ofTurn.slice(1).map((row) => row.seq));
    }
    // The two processes really interleaved (otherwise this test would show nothing about concurrency).
    const tagOfSeq = rows.map((row) => results.find((result) => result.appended.some((turn) => turn.invocationId === row.invocation_id))!.tag);
    expect(tagOfSeq.filter((tag, i) => i > 0 && tag !== tagOfSeq[i - 1]).length).toBeGreaterThan(1);

    // Each turn's tool wrote its own key; none is lost. (The shared `facts` list is read-modify-write
    // by the agent, so concurrent turns may overwrite each other's list: ADK's delta replaces a key.)
    const factKeys = Object.keys(session!.state).filter((key) => key.startsWith('fact:')).sort();
    const expected = ['alpha', 'beta'].flatMap((tag) => Array.from({ length: LOOPS * TURNS }, (_, i) => `fact:${tag}-${Math.floor(i / TURNS)}-${i % TURNS}`)).sort();
    expect(factKeys).toEqual(expected);
    expect(Object.keys(session!.state).some((key) => key.startsWith('temp:'))).toBe(false);
  });
});
