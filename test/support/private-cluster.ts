// A private PostgreSQL cluster for one test file: `initdb` into a fresh temporary directory, its own
// port and socket directory, started and stopped at will (the fault tests kill it), removed
// afterwards. The machine's shared server is never touched.
//
// PostgreSQL refuses to run as root; when the tests run as root, the directory is handed to the
// `postgres` user and initdb / pg_ctl run through `runuser -u postgres --`.
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './service-process.js';

const run = promisify(execFile);
const PG_CTL_TIMEOUT_S = 30;

export interface PrivateCluster {
  readonly dir: string;
  readonly port: number;
  /** postgres://postgres@127.0.0.1:<port>/<database> (trust authentication). */
  url(database?: string): string;
  /** Starts the server and resolves once it accepts connections (after crash recovery, if any). */
  start(): Promise<void>;
  /** `pg_ctl stop -m immediate`: every backend is killed, nothing is checkpointed, as in a crash. */
  stopImmediate(): Promise<void>;
  /** The server's log so far, for failure messages. */
  log(): Promise<string>;
  /** Stops the server if it runs and deletes the directory. */
  remove(): Promise<void>;
}

/** The directory holding initdb and pg_ctl, or undefined when PostgreSQL's server binaries are absent. */
export function findPostgresBinaries(): string | undefined {
  const onPath = (process.env.PATH ?? '').split(':').find((dir) => dir && existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')));
  if (onPath) return onPath;
  const versions = ['17', '16', '15', '14', '13'].map((v) => `/usr/lib/postgresql/${v}/bin`);
  return versions.find((dir) => existsSync(join(dir, 'initdb')));
}

export interface PrivateClusterOptions {
  /** More server settings (`-c name=value`), after the defaults below: e.g. shared_preload_libraries for Citus (private-citus.ts). */
  settings?: Record<string, string>;
}

export async function createPrivateCluster(options: PrivateClusterOptions = {}): Promise<PrivateCluster> {
  const bin = findPostgresBinaries();
  if (!bin) throw new Error('initdb and pg_ctl were not found (PATH or /usr/lib/postgresql/<version>/bin)');
  const asRoot = process.getuid?.() === 0;
  const dir = await mkdtemp(join(tmpdir(), 'ass-pgcluster-'));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    await chown(dir, uid, gid);
  }
  const command = (tool: string, args: string[]): [string, string[]] =>
    asRoot ? ['runuser', ['-u', 'postgres', '--', join(bin, tool), ...args]] : [join(bin, tool), args];
  const pgCtl = async (args: string[]) => {
    const [file, argv] = command('pg_ctl', ['-D', dataDir, '-t', String(PG_CTL_TIMEOUT_S), ...args]);
    await run(file, argv, { timeout: (PG_CTL_TIMEOUT_S + 5) * 1000 });
  };

  let running = false;
  // If the worker dies before afterAll, do not leave a postmaster behind.
  const killOnExit = () => {
    if (!running) return;
    try {
      const [file, argv] = command('pg_ctl', ['-D', dataDir, '-m', 'immediate', 'stop']);
      execFileSync(file, argv, { stdio: 'ignore', timeout: 10_000 });
    } catch {
      // already gone
    }
  };
  process.once('exit', killOnExit);

  try {
    // --no-sync only skips flushing the freshly created files; the running server keeps fsync on,
    // so a commit it acknowledged is on disk before the immediate stop.
    const [file, argv] = command('initdb', ['-D', dataDir, '-A', 'trust', '-U', 'postgres', '-E', 'UTF8', '--locale=C', '--no-sync']);
    await run(file, argv, { timeout: 60_000 });
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  let port = await freePort();
  let started = false;
  const serverOptions = () => [
    `-c port=${port}`,
    '-c listen_addresses=127.0.0.1',
    `-c unix_socket_directories=${dir}`,
    '-c fsync=on',
    '-c synchronous_commit=on',
    '-c shared_buffers=16MB',
    '-c max_connections=60',
    '-c max_wal_size=256MB',
    ...Object.entries(options.settings ?? {}).map(([name, value]) => `-c ${name}=${value}`),
  ].join(' ');

  const cluster: PrivateCluster = {
    dir,
    get port() {
      return port;
    },
    url: (database = 'postgres') => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async start() {
      for (let attempt = 1; ; attempt++) {
        try {
          await pgCtl(['-w', '-l', logFile, '-o', serverOptions(), 'start']);
          running = started = true;
          return;
        } catch (error) {
          const log = await readFile(logFile, 'utf8').catch(() => '');
          // A port found free can be taken before the server binds it (by another test's server,
          // or as an outgoing connection's local port): a first start moves to another port. A
          // restart keeps its own, which clients and Citus's node list already hold.
          if (!started && attempt < 3 && /could not bind|Address already in use/.test(log)) {
            port = await freePort();
            continue;
          }
          // The cluster's directory, log included, is removed after a failure: say what it said.
          throw new Error(`${error instanceof Error ? error.message : String(error)}\nserver.log:\n${log.slice(-4000)}`, { cause: error });
        }
      }
    },
    async stopImmediate() {
      await pgCtl(['-w', '-m', 'immediate', 'stop']);
      running = false;
    },
    log: () => readFile(logFile, 'utf8').catch(() => ''),
    async remove() {
      if (running || existsSync(join(dataDir, 'postmaster.pid'))) {
        await pgCtl(['-w', '-m', 'immediate', 'stop']).catch(() => undefined);
        running = false;
      }
      process.removeListener('exit', killOnExit);
      await rm(dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

