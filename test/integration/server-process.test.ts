// The real entry point over real HTTP: src/server.ts started as a process, as `npm start` does.
// Embedded mode prints the root credential on the first start only; the data directory keeps it.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { issueCredential } from '../../src/modules/accounts/credentials.js';
import { withDatabase } from '../support/backend.js';
import { createPrivateRedis } from '../support/private-redis.js';
import { type ServiceProcess, freePort, sleep, startServiceProcess, waitUntilReady } from '../support/service-process.js';

const START_TIMEOUT_MS = 60_000;
const TOKEN_LINE = /export TOKEN=(AKID[A-Za-z0-9]{32}\.[A-Za-z0-9_-]{43,})/g;

type RunningServer = ServiceProcess;

/** `node --import tsx src/server.ts` with info logs, the level `npm start` uses. */
const startServer = (env: Record<string, string>): RunningServer => startServiceProcess({ LOG_LEVEL: 'info', ...env });

async function stop(server: RunningServer): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM');
  return server.exited;
}

const authorized = (server: RunningServer, token: string) =>
  fetch(`${server.baseUrl}/v1/spaces`, { headers: { authorization: `Bearer ${token}` } });

let dataDir: string;
const running: RunningServer[] = [];

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'ass-server-test-'));
});

afterAll(async () => {
  for (const server of running) if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
});

describe('the server process (embedded PGlite)', () => {
  let token: string;

  it('prints the root credential once on the first start, and it authenticates over HTTP', async () => {
    const server = startServer({ DATA_DIR: dataDir, PORT: String(await freePort()), HOST: '127.0.0.1' });
    running.push(server);
    await waitUntilReady(server);

    const printed = [...server.output().matchAll(TOKEN_LINE)].map((match) => match[1]!);
    expect(printed).toHaveLength(1);
    token = printed[0]!;

    const ok = await authorized(server, token);
    expect(ok.status).toBe(200);
    const denied = await authorized(server, `${token.split('.')[0]}.${'x'.repeat(43)}`);
    expect(denied.status).toBe(401);
    expect(((await denied.json()) as { error: { code: string } }).error.code).toBe('AuthFailure');

    // The secret went to the terminal once, never into a log line.
    const secretKey = token.split('.')[1]!;
    const logLines = server.output().split('\n').filter((line) => line.startsWith('{'));
    expect(logLines.length).toBeGreaterThan(0);
    for (const line of logLines) expect(line).not.toContain(secretKey);

    expect(await stop(server)).toEqual({ code: 0, signal: null });
  }, START_TIMEOUT_MS * 2);

  it('keeps the account on the next start: nothing printed, the old token still works', async () => {
    expect(token).toBeDefined();
    const server = startServer({ DATA_DIR: dataDir, PORT: String(await freePort()), HOST: '127.0.0.1' });
    running.push(server);
    await waitUntilReady(server);

    expect(server.output()).not.toMatch(TOKEN_LINE);
    expect(server.output()).not.toContain('export TOKEN=');
    expect((await authorized(server, token)).status).toBe(200);

    expect(await stop(server)).toEqual({ code: 0, signal: null });
  }, START_TIMEOUT_MS * 2);

  it('on a busy port says so in one line and exits 1; the credential it printed works on the next start', async () => {
    const ownDataDir = await mkdtemp(join(tmpdir(), 'ass-server-busy-'));
    const occupant = createServer();
    await new Promise<void>((resolve) => occupant.listen(0, '127.0.0.1', resolve));
    try {
      const busyPort = (occupant.address() as { port: number }).port;
      const failed = startServer({ DATA_DIR: ownDataDir, PORT: String(busyPort), HOST: '127.0.0.1' });
      running.push(failed);
      expect(await failed.exited).toEqual({ code: 1, signal: null });

      // The credential was created and shown before the listen failed.
      const printed = [...failed.output().matchAll(TOKEN_LINE)].map((match) => match[1]!);
      expect(printed).toHaveLength(1);
      // Besides the credential block and JSON log lines, one line: the reason and the fix.
      const stderr = failed.stderrOutput().split('\n').filter((line) => line !== '' && !line.startsWith('{'));
      expect(stderr).toEqual([`Port ${busyPort} is in use: set PORT to another port.`]);
      expect(failed.output()).not.toMatch(/^\s+at /m);

      const next = startServer({ DATA_DIR: ownDataDir, PORT: String(await freePort()), HOST: '127.0.0.1' });
      running.push(next);
      await waitUntilReady(next);
      expect(next.output()).not.toContain('export TOKEN=');
      expect((await authorized(next, printed[0]!)).status).toBe(200);
      expect(await stop(next)).toEqual({ code: 0, signal: null });
    } finally {
      await new Promise((resolve) => occupant.close(resolve));
      await rm(ownDataDir, { recursive: true, force: true });
    }
  }, START_TIMEOUT_MS * 2);

  it('refuses to start with a bad PORT and names the variable', async () => {
    const server = startServer({ DATA_DIR: dataDir, PORT: 'abc', HOST: '127.0.0.1' });
    running.push(server);
    const { code } = await server.exited;
    expect(code).not.toBe(0);
    expect(server.output()).toMatch(/PORT:/);
    expect(server.output()).not.toContain('Server listening');
  }, START_TIMEOUT_MS);
});

const backend = inject('testBackend');

// What docker-compose.yml does: DATABASE_URL plus a pinned ROOT_API_KEY, on a fresh database.
describe.runIf(backend.kind === 'postgres')('the server process (PostgreSQL with ROOT_API_KEY)', () => {
  const database = `ass_server_${randomBytes(6).toString('hex')}`;
  const adminUrl = backend.kind === 'postgres' ? backend.adminUrl : '';
  const admin = async (text: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    await client.query(text).finally(() => client.end());
  };
  beforeAll(() => admin(`CREATE DATABASE "${database}"`));
  afterAll(() => admin(`DROP DATABASE IF EXISTS "${database}" WITH (FORCE)`));

  it('migrates, installs the pinned key without printing it, and serves with it', async () => {
    const pinned = issueCredential().token;
    const env = { DATABASE_URL: withDatabase(adminUrl, database), ROOT_API_KEY: pinned, HOST: '127.0.0.1' };
    for (let start = 1; start <= 2; start++) {
      const server = startServer({ ...env, PORT: String(await freePort()) });
      running.push(server);
      await waitUntilReady(server);
      expect(server.output()).not.toContain('export TOKEN=');
      expect(server.output()).not.toContain(pinned.split('.')[1]!);
      expect((await authorized(server, pinned)).status).toBe(200);
      expect(await stop(server)).toEqual({ code: 0, signal: null });
    }
  }, START_TIMEOUT_MS * 2);
});

// src/server.ts waits up to 2 s for REDIS_URL's server at start, then serves uncounted (fail
// open) and counts as soon as Redis answers: the process, not only the app, behaves so.
// Registered in the PGlite run only: the server here is the embedded one whichever database the
// suite runs on, so one run shows it (it waits 2 s for Redis and a fresh data folder's initdb).
const registerInEmbeddedRunOnly = inject('testBackend').kind === 'pglite' ? describe : () => undefined;
registerInEmbeddedRunOnly('the server process with REDIS_URL on a Redis that is not up yet (embedded PGlite)', () => {
  it('starts after its short wait, serves uncounted meanwhile, and counts once Redis is up', { timeout: 90_000 }, async () => {
    const redis = await createPrivateRedis();
    const folder = await mkdtemp(join(tmpdir(), 'ass-server-redis-'));
    try {
      const started = Date.now();
      const server = startServer({ DATA_DIR: folder, PORT: String(await freePort()), HOST: '127.0.0.1', REDIS_URL: redis.url, RATE_LIMIT_MAX: '2' });
      running.push(server);
      await waitUntilReady(server);
      // It waited for Redis (the start-up wait is 2 s) and said it serves uncounted.
      expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
      expect(server.output()).toContain('rate limit: Redis did not answer at start; serving uncounted until it does');
      const token = [...server.output().matchAll(TOKEN_LINE)].map((match) => match[1]!)[0]!;
      for (let i = 0; i < 4; i++) expect((await authorized(server, token)).status).toBe(200);

      await redis.start();
      // Once the client has reconnected, the limit holds: two pass, the third is refused.
      await expect
        .poll(async () => (await authorized(server, token)).status, { interval: 200, timeout: 30_000 })
        .toBe(429);
      const refused = await authorized(server, token);
      expect(refused.status).toBe(429);
      expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('RequestLimitExceeded');
      expect(await stop(server)).toEqual({ code: 0, signal: null });
    } finally {
      await redis.remove();
      await rm(folder, { recursive: true, force: true });
    }
  });
});

// `npm start` is the quick start's command, and what a process manager or a container without an
// init stops with SIGTERM. npm runs a script through `sh -c`; the shell then died of the signal
// and left the server running, orphaned, on its port and its data folder (seen: the next start
// found both taken). The script execs tsx, which hands the signal on to the server.
registerInEmbeddedRunOnly('npm start (embedded PGlite)', () => {
  it('SIGTERM to npm reaches the server: it shuts down gracefully and no process is left', { timeout: 90_000 }, async () => {
    const folder = await mkdtemp(join(tmpdir(), 'ass-npm-start-'));
    let serverPid: number | undefined;
    try {
      const server = startServiceProcess({ LOG_LEVEL: 'info', DATA_DIR: folder, PORT: String(await freePort()) }, ['npm', 'start']);
      running.push(server);
      await waitUntilReady(server);
      serverPid = server.logLines().find((line) => line.msg === 'Server listening at ' + server.baseUrl)?.pid as number;
      expect(serverPid).toBeGreaterThan(0);
      expect(serverPid).not.toBe(server.child.pid);

      // 'close' comes once every holder of the output pipes has gone: npm and the server both.
      const outcome = await Promise.race([stop(server), sleep(20_000).then(() => 'still running')]);
      expect(outcome).toEqual({ code: 0, signal: null });
      expect(server.logLines().some((line) => line.msg === 'shut down: requests finished, database pool closed' && line.pid === serverPid)).toBe(true);
      expect(processExists(serverPid)).toBe(false);
      // The port and the data folder are free: the next start serves.
      const next = startServer({ DATA_DIR: folder, PORT: new URL(server.baseUrl).port });
      running.push(next);
      await waitUntilReady(next);
      expect(await stop(next)).toEqual({ code: 0, signal: null });
    } finally {
      if (serverPid !== undefined && processExists(serverPid)) process.kill(serverPid, 'SIGKILL');
      await rm(folder, { recursive: true, force: true });
    }
  });
});

/** Whether a process with this pid exists (signal 0 only asks). */
function processExists(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
