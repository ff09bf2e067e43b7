// One data folder, one process. The embedded database (PGlite) is a single-process database: a
// second process that opened the same folder would serve, write and even print credentials that
// the first never sees and that are lost when either stops. So the server and the CLIs take this
// lock before they open the database, and a second one is refused before it has done anything.
//
// The lock is a file created atomically, whole (written aside, then linked into place; link never
// overwrites): of two processes starting at once exactly
// one creates it. It records who holds it, so that the lock of a process that died without
// removing it (kill -9, a power cut) is recognised as stale and taken over:
// - the pid is alive (signal 0), and
// - on Linux, the process with that pid started when the holder did (/proc/<pid>/stat) in the same
//   boot (/proc/sys/kernel/random/boot_id): a pid reused by another process after a crash, or
//   after a reboot, does not keep the lock.
// A pid means nothing outside its pid namespace: two containers sharing the folder as a volume both
// run as pid 1, and each would take the other's lock for its own stale one. So the lock also names
// the holder's pid namespace (/proc/self/ns/pid), and the holder touches the file every heartbeat
// (2 s). The lock of another namespace is judged by that heartbeat alone: a process watches it for
// up to 10 s, and refuses as soon as it moves; a lock that stays still that long is stale (a
// container restarted after a crash waits that long for the lock of its previous run).
import { randomBytes } from 'node:crypto';
import { readFileSync, unlinkSync } from 'node:fs';
import { link, mkdir, open, readFile, readlink, stat, unlink, utimes } from 'node:fs/promises';
import { join, resolve } from 'node:path';

export const DATA_DIR_LOCK_FILE = 'service.lock';

/** What a holder writes into the lock, and what a refused process reports of it. */
export interface LockHolder {
  pid: number;
  /** What holds it: 'server', 'admin command', 'migrate'. */
  command: string;
  startedAt: string;
  /** Linux: the process's start time in clock ticks since boot, and the boot's id; null elsewhere. */
  processStart: string | null;
  bootId: string | null;
  /** Linux: the pid namespace the pid belongs to (`pid:[<inode>]`); absent in locks of earlier versions. */
  pidNamespace?: string | null;
}

/** How often a holder touches its lock, and how long a lock of another pid namespace may stand still before it is stale. */
export interface LockTiming {
  heartbeatMs: number;
  staleAfterMs: number;
}

const DEFAULT_TIMING: LockTiming = { heartbeatMs: 2_000, staleAfterMs: 10_000 };

export interface DataDirLock {
  path: string;
  release(): Promise<void>;
}

/** Another live process holds the folder. The message is the one line the refused process prints. */
export class DataDirInUseError extends Error {
  override name = 'DataDirInUseError';
  constructor(
    readonly dataDir: string,
    readonly holder: LockHolder,
    advice: string,
  ) {
    super(`The data folder ${dataDir} is in use by a running ${holder.command} (pid ${holder.pid}): ${advice}`);
  }
}

/** Whether `holder`, named in the lock file at `path`, still holds it (isAlive, as this process judges it). */
type HoldsLock = (holder: LockHolder, path: string) => Promise<boolean>;

// Enough for a few processes racing over a stale lock; each turn of the loop is one of them winning.
const MAX_ATTEMPTS = 200;

/**
 * Takes the lock of `dataDir` (created if missing) for this process, or throws DataDirInUseError
 * naming the holder; `advice` says what to do instead (it ends the one-line message). The lock is
 * released by release(), and in any case when the process exits.
 */
export async function lockDataDir(dataDir: string, command: string, advice: string, timing: LockTiming = DEFAULT_TIMING): Promise<DataDirLock> {
  const folder = resolve(dataDir);
  await mkdir(folder, { recursive: true });
  const path = join(folder, DATA_DIR_LOCK_FILE);
  const me: LockHolder = { pid: process.pid, command, startedAt: new Date().toISOString(), ...(await ownIdentity()) };
  const text = `${JSON.stringify(me)}\n`;
  const holds: HoldsLock = (holder, lockPath) => isAlive(holder, lockPath, me.pidNamespace ?? null, timing);
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    if (await createExclusively(path, text)) return held(path, text, timing.heartbeatMs);
    const found = await readLock(path);
    if (found === undefined) continue; // removed in between: try again
    if (found.holder && (await holds(found.holder, path))) throw new DataDirInUseError(folder, found.holder, advice);
    await removeStaleLock(path, found.text, text, holds);
  }
  throw new Error(`Could not take the lock ${path}: other processes kept taking it over`);
}

/**
 * Creates `path` holding `text`, unless it exists. The text is written to a file of our own first and
 * then linked into place (link never overwrites), so nobody ever reads a lock without its holder: an
 * empty lock, between an O_EXCL create and its write, would look stale to a racing process.
 */
async function createExclusively(path: string, text: string): Promise<boolean> {
  const own = `${path}.new-${process.pid}-${randomBytes(4).toString('hex')}`;
  const file = await open(own, 'wx', 0o600);
  try {
    await file.writeFile(text);
  } finally {
    await file.close();
  }
  try {
    await link(own, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  } finally {
    await unlink(own).catch(() => {});
  }
}

/** The lock's text, with its holder when it parses (a lock cut short by a crash does not: stale). */
async function readLock(path: string): Promise<{ text: string; holder: LockHolder | undefined } | undefined> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  try {
    const holder = JSON.parse(text) as LockHolder;
    return { text, holder: Number.isSafeInteger(holder.pid) && holder.pid > 0 ? holder : undefined };
  } catch {
    return { text, holder: undefined };
  }
}

/**
 * Removes the stale lock whose text was `staleText`, and nothing else. Only the holder of the
 * takeover lock (`<lock>.takeover`) removes a lock, and a new lock is only ever created where none
 * is: so while we hold the takeover lock and the lock still reads `staleText`, nobody can replace it,
 * and removing it by name removes exactly the stale one. A takeover lock left by a process that died
 * holding it is removed in turn; anyone else waits a moment and reads the lock again.
 */
async function removeStaleLock(path: string, staleText: string, myText: string, holds: HoldsLock): Promise<void> {
  const takeover = `${path}.takeover`;
  if (!(await createExclusively(takeover, myText))) {
    const other = await readLock(takeover);
    if (other?.holder && !(await holds(other.holder, takeover))) await unlink(takeover).catch(() => {});
    else await new Promise((resolve) => setTimeout(resolve, 20));
    return;
  }
  try {
    if ((await readLock(path))?.text === staleText) await unlink(path).catch(() => {});
  } finally {
    await unlink(takeover).catch(() => {});
  }
}

function held(path: string, text: string, heartbeatMs: number): DataDirLock {
  // Removes the lock only while it is still ours (a process that took it over as stale keeps its own).
  const removeIfOurs = () => readLock(path).then((found) => (found?.text === text ? unlink(path) : undefined));
  // The heartbeat that processes of other pid namespaces go by; touches the lock only while it is ours.
  const heartbeat = setInterval(() => {
    void readLock(path)
      .then((found) => (found?.text === text ? utimes(path, new Date(), new Date()) : undefined))
      .catch(() => {});
  }, heartbeatMs);
  heartbeat.unref();
  let released = false;
  const onExit = () => {
    clearInterval(heartbeat);
    if (released) return;
    try {
      // 'exit' listeners must be synchronous; process.exit() after a failed start ends up here.
      if (readFileSync(path, 'utf8') === text) unlinkSync(path);
    } catch {
      // gone already
    }
  };
  process.once('exit', onExit);
  return {
    path,
    async release() {
      if (released) return;
      released = true;
      clearInterval(heartbeat);
      process.off('exit', onExit);
      await removeIfOurs().catch(() => {});
    },
  };
}

async function isAlive(holder: LockHolder, path: string, myNamespace: string | null, timing: LockTiming): Promise<boolean> {
  if (holder.pidNamespace && myNamespace && holder.pidNamespace !== myNamespace) return heartbeatSeen(path, timing);
  // A lock with our own pid was written by an earlier process that had it (a container's pid 1).
  if (holder.pid === process.pid) return false;
  try {
    process.kill(holder.pid, 0);
  } catch (error) {
    // EPERM: the process exists, under another user.
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (holder.processStart === null || holder.bootId === null) return true;
  const now = await identityOf(holder.pid);
  if (now.processStart === null || now.bootId === null) return true; // cannot tell: the pid is alive
  return !now.zombie && now.processStart === holder.processStart && now.bootId === holder.bootId;
}

/** Whether the lock at `path` is touched within `staleAfterMs` (false once it is gone). */
async function heartbeatSeen(path: string, { heartbeatMs, staleAfterMs }: LockTiming): Promise<boolean> {
  const modified = () => stat(path).then((found) => found.mtimeMs, () => undefined);
  const first = await modified();
  const until = performance.now() + staleAfterMs;
  while (first !== undefined && performance.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, Math.min(heartbeatMs / 4, 250)));
    const now = await modified();
    if (now === undefined) return false;
    if (now !== first) return true;
  }
  return false;
}

async function ownIdentity(): Promise<Pick<LockHolder, 'processStart' | 'bootId' | 'pidNamespace'>> {
  const { processStart, bootId } = await identityOf(process.pid);
  const pidNamespace = await readlink('/proc/self/ns/pid').catch(() => null);
  return { processStart, bootId, pidNamespace };
}

type Identity = Pick<LockHolder, 'processStart' | 'bootId'> & { zombie: boolean };

/**
 * The start time (clock ticks since boot) of process `pid` and the boot's id, where /proc has them;
 * `zombie` when it has ended and waits for its parent to read its exit status (it holds nothing).
 */
async function identityOf(pid: number): Promise<Identity> {
  try {
    const [stat, bootId] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile('/proc/sys/kernel/random/boot_id', 'utf8')]);
    // The command name (field 2) is in parentheses and may hold spaces: count fields after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Field 22 of stat is starttime; fields[0] here is field 3.
    const processStart = fields[22 - 3];
    return { processStart: processStart ?? null, bootId: bootId.trim(), zombie: fields[0] === 'Z' || fields[0] === 'X' };
  } catch {
    return { processStart: null, bootId: null, zombie: false };
  }
}
