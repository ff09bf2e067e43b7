// The data folder's lock on a real file system: one holder, refusals that name it, stale locks
// (a dead pid, a reused pid, a torn file) taken over, a race that exactly one process wins, and two
// pid namespaces (two containers sharing the folder), where pids say nothing and the heartbeat decides.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DATA_DIR_LOCK_FILE, DataDirInUseError, type LockHolder, lockDataDir } from '../../src/lib/data-dir-lock.js';

const ADVICE = 'stop it first.';
let dataDir: string;
beforeEach(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'ass-lock-'));
});
afterEach(() => rm(dataDir, { recursive: true, force: true }));

const lockPath = () => join(dataDir, DATA_DIR_LOCK_FILE);
const readHolder = async (): Promise<LockHolder> => JSON.parse(await readFile(lockPath(), 'utf8'));

/** A process that is alive while the test runs, and is killed at the end. */
async function withLiveProcess<T>(fn: (pid: number) => Promise<T>): Promise<T> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('spawn', resolve));
  try {
    return await fn(child.pid!);
  } finally {
    child.kill('SIGKILL');
  }
}

/** A pid no process has now: a child that has exited (and been reaped). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' });
  await new Promise((resolve) => child.once('close', resolve));
  return child.pid!;
}

/**
 * Runs `script` (TypeScript, as an ES module) in a child process, `prefix` in front of node (e.g.
 * unshare); `answered` is the first line it prints, `closed` resolves when it exits.
 */
function startScript(script: string, { prefix = [] as string[], stdin = 'ignore' as 'ignore' | 'pipe' } = {}) {
  const [command, ...args] = [...prefix, process.execPath, '--import', 'tsx', '--input-type=module', '-e', script];
  const child = spawn(command!, args, { stdio: [stdin, 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
  const answered = new Promise<string>((resolve) => {
    const check = () => (out.includes('\n') ? resolve(out.trim()) : setTimeout(check, 20));
    check();
  });
  return { child, answered, closed: new Promise((resolve) => child.once('close', resolve)) };
}

describe('lockDataDir', () => {
  it('creates the folder and records this process; release removes the lock', async () => {
    const folder = join(dataDir, 'new', 'data');
    const lock = await lockDataDir(folder, 'server', ADVICE);
    expect(lock.path).toBe(join(folder, DATA_DIR_LOCK_FILE));
    const holder: LockHolder = JSON.parse(await readFile(lock.path, 'utf8'));
    expect(holder).toMatchObject({ pid: process.pid, command: 'server', startedAt: expect.any(String) });
    await lock.release();
    expect(await readdir(folder)).toEqual([]);
  });

  it('refuses a second taker with one line naming the folder, the holder and what to do', async () => {
    const lock = await lockDataDir(dataDir, 'server', ADVICE);
    await withLiveProcess(async (pid) => {
      // The lock as another live process would have written it (this process's own pid counts as stale).
      await writeFile(lockPath(), JSON.stringify({ ...(await readHolder()), pid, processStart: null, bootId: null }));
      const refusal = await lockDataDir(dataDir, 'admin command', 'use the HTTP API.').catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(DataDirInUseError);
      expect((refusal as Error).message).toBe(`The data folder ${dataDir} is in use by a running server (pid ${pid}): use the HTTP API.`);
      // The holder's lock is untouched.
      expect((await readHolder()).pid).toBe(pid);
    });
    await lock.release();
  });

  it('takes over the lock of a process that is gone', async () => {
    await writeFile(lockPath(), JSON.stringify({ pid: await deadPid(), command: 'server', startedAt: '2026-01-01T00:00:00.000Z', processStart: null, bootId: null }));
    const lock = await lockDataDir(dataDir, 'server', ADVICE);
    expect((await readHolder()).pid).toBe(process.pid);
    await lock.release();
  });

  it.runIf(process.platform === 'linux')('takes over a lock whose pid now belongs to another process (pid reuse)', async () => {
    await withLiveProcess(async (pid) => {
      const bootId = (await readFile('/proc/sys/kernel/random/boot_id', 'utf8')).trim();
      // Same pid and boot, but the process with that pid started at another time: not the holder.
      await writeFile(lockPath(), JSON.stringify({ pid, command: 'server', startedAt: '2026-01-01T00:00:00.000Z', processStart: '1', bootId }));
      const lock = await lockDataDir(dataDir, 'server', ADVICE);
      expect((await readHolder()).pid).toBe(process.pid);
      await lock.release();
    });
  });

  it('takes over a lock cut short by a crash, and a lock of its own pid', async () => {
    await writeFile(lockPath(), '{"pid":12');
    await (await lockDataDir(dataDir, 'server', ADVICE)).release();
    await writeFile(lockPath(), JSON.stringify({ pid: process.pid, command: 'server', startedAt: '', processStart: null, bootId: null }));
    await (await lockDataDir(dataDir, 'server', ADVICE)).release();
    expect(await readdir(dataDir)).toEqual([]);
  });

  it('lets exactly one of several processes racing for a stale lock win', async () => {
    await writeFile(lockPath(), JSON.stringify({ pid: await deadPid(), command: 'server', startedAt: '', processStart: null, bootId: null }));
    const moduleUrl = new URL('../../src/lib/data-dir-lock.ts', import.meta.url).href;
    // Each racer takes the lock and holds it until told to exit; it prints "won" or "refused".
    const script = `
      const { lockDataDir } = await import(${JSON.stringify(moduleUrl)});
      try { await lockDataDir(${JSON.stringify(dataDir)}, 'server', 'x'); console.log('won'); }
      catch (error) { console.log(error.name === 'DataDirInUseError' ? 'refused' : 'error ' + error.message); }
      process.stdin.resume(); process.stdin.on('end', () => process.exit(0));`;
    const racers = Array.from({ length: 4 }, () => startScript(script, { stdin: 'pipe' }));
    const answers = await Promise.all(racers.map((racer) => racer.answered));
    expect([...answers].sort()).toEqual(['refused', 'refused', 'refused', 'won']);
    expect((await readHolder()).pid).toBe(racers[answers.indexOf('won')]!.child.pid);
    for (const racer of racers) racer.child.stdin!.end();
    await Promise.all(racers.map((racer) => racer.closed));
    // The winner removed its lock when it exited; no moved-aside stale files are left behind.
    expect(await readdir(dataDir)).toEqual([]);
  }, 30_000);

  it('touches its lock every heartbeat while it holds it', async () => {
    const lock = await lockDataDir(dataDir, 'server', ADVICE, { heartbeatMs: 50, staleAfterMs: 1_000 });
    const first = (await stat(lock.path)).mtimeMs;
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect((await stat(lock.path)).mtimeMs).toBeGreaterThan(first);
    await lock.release();
  });

  it("refuses the lock of another pid namespace while it is touched, even with this process's own pid; takes it over once it stands still", async () => {
    const timing = { heartbeatMs: 100, staleAfterMs: 1_000 };
    // A holder in another namespace whose pid is ours, as two containers' pid 1 are.
    const otherNamespaceLock = JSON.stringify({ pid: process.pid, command: 'server', startedAt: '', processStart: null, bootId: null, pidNamespace: 'pid:[1]' });
    await writeFile(lockPath(), otherNamespaceLock);
    const touching = setInterval(() => void writeFile(lockPath(), otherNamespaceLock), 50);
    try {
      const refusal = await lockDataDir(dataDir, 'server', ADVICE, timing).catch((error: unknown) => error);
      expect(refusal).toBeInstanceOf(DataDirInUseError);
    } finally {
      clearInterval(touching);
    }
    const started = performance.now();
    const lock = await lockDataDir(dataDir, 'server', ADVICE, timing);
    expect(performance.now() - started).toBeGreaterThanOrEqual(timing.staleAfterMs - 50);
    expect((await readHolder()).pid).toBe(process.pid);
    await lock.release();
  });

  const unshareWorks = process.platform === 'linux' && spawnSync('unshare', ['--pid', '--fork', '--mount-proc', 'true']).status === 0;

  it.runIf(unshareWorks)('two processes in pid namespaces of their own, both pid 1 (two containers on one volume): the second is refused while the first runs, and takes over after it is killed', async () => {
    const moduleUrl = new URL('../../src/lib/data-dir-lock.ts', import.meta.url).href;
    // Takes the lock, prints its pid and "won" or "refused", then holds it until killed.
    const script = `
      const { lockDataDir } = await import(${JSON.stringify(moduleUrl)});
      try { await lockDataDir(${JSON.stringify(dataDir)}, 'server', 'x', { heartbeatMs: 100, staleAfterMs: 1500 }); console.log(process.pid, 'won'); }
      catch (error) { console.log(process.pid, error.name === 'DataDirInUseError' ? 'refused' : 'error ' + error.message); process.exit(0); }
      setInterval(() => {}, 1000);`;
    // --kill-child: the namespace's pid 1 dies with unshare.
    const inNamespace = () => startScript(script, { prefix: ['unshare', '--pid', '--fork', '--mount-proc', '--kill-child'] });
    const first = inNamespace();
    expect(await first.answered).toBe('1 won');
    const second = inNamespace();
    expect(await second.answered).toBe('1 refused');
    await second.closed;
    first.child.kill('SIGKILL');
    await first.closed;
    // The first left its lock behind (killed); the next one waits for it to stand still, then takes it.
    expect((await readHolder()).pid).toBe(1);
    const third = inNamespace();
    expect(await third.answered).toBe('1 won');
    third.child.kill('SIGKILL');
    await third.closed;
  }, 60_000);
});
