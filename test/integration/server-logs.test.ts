// What the server process writes to its log: JSON lines through a pipe (or LOG_FORMAT=json), readable
// lines with LOG_FORMAT=pretty (or on a terminal); health probes nothing at info level; and a warning
// at start when the Node.js running it is older than package.json's engines allow.
import { execFile, execFileSync } from 'node:child_process';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, inject, it } from 'vitest';
import { freePort, killServiceProcess, nodeOfMajor, runNodeScript, type ServiceProcess, startServiceProcess, waitUntilReady } from '../support/service-process.js';

const TIMEOUT_MS = 120_000;
const running: ServiceProcess[] = [];
const folders: string[] = [];

afterAll(async () => {
  for (const server of running) killServiceProcess(server);
  await Promise.all(running.map((server) => server.exited));
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

/** Starts an embedded server on a data folder of its own, waits for it, calls a route and the probes, and stops it. */
async function serveAndStop(env: Record<string, string>): Promise<string> {
  const dataDir = await mkdtemp(join(tmpdir(), 'ass-logs-'));
  folders.push(dataDir);
  const backend = inject('testBackend');
  if (backend.kind === 'pglite') await cp(backend.dataDir, dataDir, { recursive: true });
  const server = startServiceProcess({ DATA_DIR: dataDir, PORT: String(await freePort()), LOG_LEVEL: 'info', ...env });
  running.push(server);
  await waitUntilReady(server);
  expect((await fetch(`${server.baseUrl}/v1/spaces`)).status).toBe(401);
  for (const probe of ['/healthz', '/readyz', '/metrics']) expect((await fetch(`${server.baseUrl}${probe}`)).status).toBe(200);
  server.child.kill('SIGTERM');
  expect(await server.exited).toEqual({ code: 0, signal: null });
  // The log lines: stdout without the root credential block printed on the first start.
  return server.output().split('\n').filter((line) => line !== '' && !/^(Created the| {2}export TOKEN=|Default space:)/.test(line)).join('\n');
}

describe('log format', () => {
  it('JSON lines through a pipe by default; a probe logs nothing at info, a request one line', { timeout: TIMEOUT_MS }, async () => {
    const lines = (await serveAndStop({})).split('\n').map((line) => JSON.parse(line) as { level: number; msg: string; route?: string });
    expect(lines.map((line) => line.msg)).toEqual(expect.arrayContaining(['database ready', 'request completed', 'shutting down']));
    const requests = lines.filter((line) => line.msg === 'request completed');
    expect(requests.map((line) => [line.route, line.level])).toEqual([['/v1/spaces', 30]]);
  });

  it('readable lines with LOG_FORMAT=pretty, not JSON, with the same records', { timeout: TIMEOUT_MS }, async () => {
    const lines = (await serveAndStop({ LOG_FORMAT: 'pretty' })).split('\n');
    for (const line of lines) {
      expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} (INFO |WARN |ERROR) \S/);
      expect(() => JSON.parse(line)).toThrow();
    }
    expect(lines.some((line) => / INFO {2}database ready backend=pglite /.test(line))).toBe(true);
    expect(lines.filter((line) => line.includes('request completed'))).toEqual([
      expect.stringMatching(/ INFO {2}request completed requestId=\S+ method=GET route=\/v1\/spaces statusCode=401 latencyMs=/),
    ]);
  });
});

describe('log format on a terminal', () => {
  // script(1) runs the server with a pseudo-terminal as stdout. Under a Node.js older than engines,
  // so that a log line (the version warning) comes before the start fails on a DATABASE_URL nobody
  // listens on.
  const onTerminal = async (env: Record<string, string>): Promise<string> => {
    const node = nodeOfMajor((major) => major < 22, '20');
    const port = await freePort();
    return new Promise((resolve, reject) =>
      execFile(
        'script',
        ['-qec', `${node} --import tsx src/server.ts`, '/dev/null'],
        {
          cwd: new URL('../..', import.meta.url).pathname,
          env: { PATH: process.env.PATH ?? '', DATABASE_URL: `postgres://svc@127.0.0.1:${port}/x`, PORT: '0', LOG_LEVEL: 'info', ...env },
          timeout: TIMEOUT_MS,
        },
        (error, stdout) => (error && typeof error.code !== 'number' ? reject(error) : resolve(stdout)),
      ),
    );
  };
  const warningLine = (output: string) => output.split(/\r?\n/).find((line) => line.includes('older than this service supports'));

  it('readable, coloured lines by default', { timeout: TIMEOUT_MS }, async () => {
    const line = warningLine(await onTerminal({}))!;
    // The level in yellow (ANSI 33), then the message.
    expect(line.slice(12)).toMatch(/^ \S+WARN \S+ Node\.js v20\./);
    expect(line.slice(13, 18)).toBe(`${String.fromCharCode(27)}[33m`);
    expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} /);
  });

  it('JSON lines with LOG_FORMAT=json', { timeout: TIMEOUT_MS }, async () => {
    expect(JSON.parse(warningLine(await onTerminal({ LOG_FORMAT: 'json' }))!)).toMatchObject({ level: 40, msg: expect.stringMatching(/^Node\.js v20\./) });
  });
});

describe('the Node.js version', () => {
  // A DATABASE_URL nothing listens on: the warning comes first, then the start fails fast.
  const start = async (node: string) =>
    runNodeScript('src/server.ts', [], { DATABASE_URL: `postgres://svc@127.0.0.1:${await freePort()}/x`, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info' }, node);
  const warnings = (stdout: string) => stdout.split('\n').filter((line) => line.includes('older than this service supports'));

  it('below engines (Node 20): one warning at start naming the version and the range', { timeout: TIMEOUT_MS }, async () => {
    const node = nodeOfMajor((major) => major < 22, '20');
    const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
    expect(version).toMatch(/^v20\./);
    const result = await start(node);
    expect(result.code).toBe(1);
    expect(warnings(result.stdout).map((line) => JSON.parse(line))).toEqual([
      expect.objectContaining({
        level: 40,
        nodeVersion: version,
        msg: `Node.js ${version} is older than this service supports (package.json engines: node >=22): upgrade Node.js; some features may fail.`,
      }),
    ]);
  });

  it('within engines (Node 24): no warning', { timeout: TIMEOUT_MS }, async () => {
    const node = nodeOfMajor((major) => major >= 22, '24');
    expect(execFileSync(node, ['--version'], { encoding: 'utf8' })).toMatch(/^v2[2-9]\./);
    const result = await start(node);
    // It did start: the failure is the database's, after the point where the warning would be.
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Cannot reach PostgreSQL at 127\.0\.0\.1:\d+ \(connection refused\)/);
    expect(warnings(result.stdout)).toEqual([]);
  });
});
