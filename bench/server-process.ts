// The real server as a child process (src/server.ts through tsx), for the benchmarks that load it
// over HTTP: the load generator then does not share the server's event loop.
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/**
 * Starts the server on 127.0.0.1:`port` with rate limiting and the sweeper off. BENCH_SERVER_ROOT
 * runs the server of another checkout (its src/ and node_modules), to compare two versions in one run.
 * `compiled` (default: BENCH_SERVER_COMPILED=1) runs the root's dist/server.js, built beforehand by
 * `npm run build`, as the Docker image does, instead of src/server.ts through tsx.
 */
export function startServer(
  databaseUrl: string | undefined,
  port: number,
  options: { env?: Record<string, string>; nodeArgs?: string[]; root?: string; compiled?: boolean } = {},
): ChildProcess {
  const compiled = options.compiled ?? process.env.BENCH_SERVER_COMPILED === '1';
  // Without a URL the server opens its embedded PGlite in DATA_DIR (options.env), as `npm start` does.
  const { DATABASE_URL: _inherited, ...inherited } = process.env;
  const entry = compiled ? ['dist/server.js'] : ['--import', 'tsx', 'src/server.ts'];
  return spawn(process.execPath, [...(options.nodeArgs ?? []), ...entry], {
    cwd: options.root ?? process.env.BENCH_SERVER_ROOT ?? ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: {
      ...inherited,
      ...(databaseUrl === undefined ? {} : { DATABASE_URL: databaseUrl }),
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      RATE_LIMIT_MAX: '0',
      SWEEP_INTERVAL_MS: '0',
      ...options.env,
    },
  });
}

/** The hand-written HTTP service (hand-written-server.ts) on 127.0.0.1:`port`, over the minimal schema of `databaseUrl`. */
export function startHandWrittenServer(databaseUrl: string, port: number, poolMax: number): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', 'bench/hand-written-server.ts'], {
    cwd: ROOT,
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: String(port), POOL_MAX: String(poolMax) },
  });
}

export async function waitReady(base: string, server: ChildProcess): Promise<void> {
  for (let attempt = 0; attempt < 300; attempt++) {
    if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}`);
    try {
      if ((await fetch(`${base}/readyz`)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error('the server did not become ready in 30 s');
}

export async function stopServer(server: ChildProcess): Promise<void> {
  if (server.exitCode !== null) return;
  const exited = new Promise((resolve) => server.once('exit', resolve));
  server.kill('SIGTERM');
  await exited;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

/** Resident set size of a process, in MiB, from /proc (Linux); NaN when it cannot be read. */
export function rssOfProcess(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return line ? Number(line.split(/\s+/)[1]) / 1024 : Number.NaN;
}

/** Scrapes the server's /metrics; the function it answers reads an unlabelled sample, undefined when absent. */
export async function scrapeMetrics(base: string): Promise<(name: string) => number | undefined> {
  const text = await (await fetch(`${base}/metrics`)).text();
  return (name) => {
    const match = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(text);
    return match ? Number(match[1]) : undefined;
  };
}
