// A private redis-server for one test file: its own port and working directory (nothing saved),
// started and stopped at will (the fail-open test stops it), removed afterwards. The machine's
// shared Redis is never touched by it.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, sleep } from './service-process.js';

export interface PrivateRedis {
  readonly port: number;
  readonly url: string;
  /** Starts redis-server and resolves once it answers PING. */
  start(): Promise<void>;
  /** SIGKILL, as in a crash or a network cut; resolves once the process is gone. */
  kill(): Promise<void>;
  /** Stops the server if it runs and deletes the directory. */
  remove(): Promise<void>;
}

export async function createPrivateRedis(): Promise<PrivateRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'ass-redis-'));
  const port = await freePort();
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();
  const killOnExit = () => child?.kill('SIGKILL');
  process.once('exit', killOnExit);

  const kill = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGKILL');
    await exited;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    async start() {
      const started = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir], { stdio: 'ignore' });
      child = started;
      exited = new Promise((resolve) => started.once('exit', () => resolve()));
      const probe = new Redis(port, '127.0.0.1', { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => null });
      probe.on('error', () => {});
      try {
        for (let attempt = 0; attempt < 100; attempt++) {
          if (started.exitCode !== null) throw new Error(`redis-server exited with ${started.exitCode}`);
          try {
            await probe.connect();
            if ((await probe.ping()) === 'PONG') return;
          } catch {
            probe.disconnect();
            await sleep(50);
          }
        }
        throw new Error('redis-server did not answer PING');
      } finally {
        probe.disconnect();
      }
    },
    kill,
    async remove() {
      await kill();
      process.removeListener('exit', killOnExit);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
