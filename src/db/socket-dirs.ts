// The private directories that hold the embedded database's socket (connect.ts, openPglite). A
// server removes its own when it closes; one that was killed cannot, and its directory, with a
// stale socket in it, would stay in the temporary folder for good (CI left one per run). Each
// directory names the process that made it, so a later start removes those whose process is gone
// and whose socket no longer answers.
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const PREFIX = 'ass-pglite-';
const OWNER_FILE = 'owner.pid';
const SOCKET_FILE = '.s.PGSQL.5432';

/** A new socket directory (mode 0700) of this process, after removing those of processes that are gone. */
export async function makeSocketDir(parent = tmpdir()): Promise<string> {
  await removeAbandonedSocketDirs(parent);
  const dir = await mkdtemp(join(parent, PREFIX));
  await writeFile(join(dir, OWNER_FILE), String(process.pid), { mode: 0o600 });
  return dir;
}

/** The path of the socket inside a socket directory. */
export const socketPathIn = (dir: string): string => join(dir, SOCKET_FILE);

/**
 * Removes the socket directories in `parent` whose owner process no longer runs and whose socket
 * refuses connections (or is absent). A directory without an owner file (another program's, or one
 * being made) is left alone, as is one whose process runs or cannot be told (a process of another
 * user: EPERM), and one whose socket answers: a process id names a process only in its own PID
 * namespace, and a temporary folder may be shared with a container's server.
 */
export async function removeAbandonedSocketDirs(parent = tmpdir()): Promise<void> {
  let names: string[];
  try {
    names = (await readdir(parent)).filter((name) => name.startsWith(PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(parent, name);
    const owner = Number(await readFile(join(dir, OWNER_FILE), 'utf8').catch(() => ''));
    if (!Number.isInteger(owner) || owner <= 0 || processRuns(owner) || !(await socketRefuses(socketPathIn(dir)))) continue;
    await rm(dir, { recursive: true, force: true }).catch(() => undefined);
  }
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Whether nothing listens on the Unix socket at `path`: refused, or no socket there. */
function socketRefuses(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ path });
    const done = (refused: boolean) => {
      socket.destroy();
      clearTimeout(timer);
      resolve(refused);
    };
    const timer = setTimeout(() => done(false), 1_000);
    socket.once('connect', () => done(false));
    socket.once('error', (error: NodeJS.ErrnoException) => done(error.code === 'ECONNREFUSED' || error.code === 'ENOENT'));
  });
}
