// The service as a real process (`node --import tsx src/server.ts`, what `npm start` runs without
// npm between it and the signals), for tests that watch the process itself: it must not exit, or
// it must exit cleanly.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface ServiceProcess {
  child: ChildProcess;
  baseUrl: string;
  /** stdout and stderr as they arrived. */
  output(): string;
  stderrOutput(): string;
  /** The JSON log lines written so far. */
  logLines(): Record<string, unknown>[];
  alive(): boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** What starts the service: node itself by default; `['npm', 'start']` to test the quick start's command. */
const NODE_SERVER = [process.execPath, '--import', 'tsx', 'src/server.ts'];

export function startServiceProcess(env: Record<string, string>, [command, ...args] = NODE_SERVER): ServiceProcess {
  const child = spawn(command!, args, {
    cwd: ROOT,
    // DATABASE_URL and ROOT_API_KEY from the developer's shell must not leak in: empty means unset.
    env: { ...process.env, DATABASE_URL: '', ROOT_API_KEY: '', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    stderr += chunk.toString();
  });
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    // 'close', not 'exit': by then stdout and stderr are read to the end.
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    baseUrl: `http://127.0.0.1:${env.PORT}`,
    output: () => output,
    stderrOutput: () => stderr,
    logLines: () =>
      output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .flatMap((line) => {
          try {
            return [JSON.parse(line) as Record<string, unknown>];
          } catch {
            return [];
          }
        }),
    alive: () => child.exitCode === null && child.signalCode === null,
    exited,
  };
}

export async function waitUntilReady(service: ServiceProcess, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline && service.alive()) {
    try {
      const res = await fetch(`${service.baseUrl}/readyz`, { signal: AbortSignal.timeout(5_000) });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`the service did not become ready:\n${service.output()}`);
}

/** SIGKILL for clean-up after a failed test; the tests themselves send SIGTERM. */
export function killServiceProcess(service: ServiceProcess | undefined): void {
  if (service?.alive()) service.child.kill('SIGKILL');
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Asks the OS for a port nobody listens on; the cluster binds it a moment later. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * `node --import tsx <script> …args` to its end (an operator command: src/cli/admin.ts, src/cli/migrate.ts),
 * in a clean environment: only PATH and `env`, so no DATABASE_URL leaks in from the shell. `node`
 * picks another Node.js binary.
 */
export function runNodeScript(script: string, args: string[], env: Record<string, string>, node = process.execPath): Promise<CommandResult> {
  return new Promise((resolve) => {
    const child = spawn(node, ['--import', 'tsx', script, ...args], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The path of a Node.js binary whose major passes `test`: the one running the tests if it does,
 * else `node@<fallback>` fetched by npx from the npm registry (CI fetches Node 22 and 24 this way too).
 */
export function nodeOfMajor(test: (major: number) => boolean, fallback: string, timeoutMs = 120_000): string {
  if (test(Number(process.versions.node.split('.')[0]))) return process.execPath;
  return execFileSync('npx', ['-y', `node@${fallback}`, '-p', 'process.execPath'], { encoding: 'utf8', timeout: timeoutMs }).trim();
}
