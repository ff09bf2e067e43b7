// One data folder, one process: a second server, an admin command or `npm run migrate` on a folder
// a server uses is refused at once, in one line, having written nothing; the lock of a server
// killed with SIGKILL does not keep the next one from starting.
import { cp, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import {
  freePort,
  killServiceProcess,
  runNodeScript,
  type ServiceProcess,
  startServiceProcess,
  waitUntilReady,
} from '../support/service-process.js';

const TIMEOUT_MS = 120_000;
const TOKEN_LINE = /export TOKEN=(AKID[A-Za-z0-9]{32}\.[A-Za-z0-9_-]{43,})/;

const running: ServiceProcess[] = [];
const folders: string[] = [];

/** A data folder of its own: a copy of the migrated one on PGlite (initdb costs seconds), else empty. */
async function dataFolder(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), 'ass-in-use-'));
  folders.push(folder);
  const backend = inject('testBackend');
  if (backend.kind === 'pglite') await cp(backend.dataDir, folder, { recursive: true });
  return folder;
}

async function startServer(dataDir: string): Promise<ServiceProcess> {
  const server = startServiceProcess({ DATA_DIR: dataDir, PORT: String(await freePort()), LOG_LEVEL: 'info' });
  running.push(server);
  return server;
}

const inUse = (dataDir: string, pid: number, advice: string) => `The data folder ${dataDir} is in use by a running server (pid ${pid}): ${advice}\n`;
const SERVER_ADVICE = 'stop it first, or set DATA_DIR to another folder.';
const COMMAND_ADVICE = 'stop it, then run this command again (while a server runs, use its HTTP API instead).';

afterAll(async () => {
  for (const server of running) killServiceProcess(server);
  await Promise.all(running.map((server) => server.exited));
  await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
});

describe('a data folder in use by a server', () => {
  let dataDir: string;
  let first: ServiceProcess;
  let token: string;
  beforeAll(async () => {
    dataDir = await dataFolder();
    first = await startServer(dataDir);
    await waitUntilReady(first);
    token = first.output().match(TOKEN_LINE)![1]!;
  }, TIMEOUT_MS);

  it('refuses a second server in one line, exit 1, while the first keeps serving', { timeout: TIMEOUT_MS }, async () => {
    const second = await startServer(dataDir);
    expect(await second.exited).toEqual({ code: 1, signal: null });
    expect(second.stderrOutput()).toBe(inUse(dataDir, first.child.pid!, SERVER_ADVICE));
    expect(second.output()).not.toContain('export TOKEN=');
    expect(second.output()).not.toContain('Server listening');

    const res = await fetch(`${first.baseUrl}/v1/spaces`, { headers: { authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    expect(JSON.parse(await readFile(join(dataDir, 'service.lock'), 'utf8'))).toMatchObject({ pid: first.child.pid, command: 'server' });
  });

  it('refuses an admin command and npm run migrate in one line, exit 1, printing no credential', { timeout: TIMEOUT_MS }, async () => {
    const created = await runNodeScript('src/cli/admin.ts', ['create-account', '--name', 'while-serving'], { DATA_DIR: dataDir });
    expect(created).toEqual({ code: 1, stdout: '', stderr: inUse(dataDir, first.child.pid!, COMMAND_ADVICE) });
    const migrated = await runNodeScript('src/cli/migrate.ts', [], { DATA_DIR: dataDir });
    expect(migrated).toEqual({ code: 1, stdout: '', stderr: inUse(dataDir, first.child.pid!, COMMAND_ADVICE) });
    expect((await fetch(`${first.baseUrl}/readyz`)).status).toBe(200);
  });

  it('after the server stops, the folder is free and the refused command wrote nothing', { timeout: TIMEOUT_MS }, async () => {
    first.child.kill('SIGTERM');
    expect(await first.exited).toEqual({ code: 0, signal: null });
    const listed = await runNodeScript('src/cli/admin.ts', ['list-accounts'], { DATA_DIR: dataDir, LOG_LEVEL: 'silent' });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout.trim().split('\n').map((line) => JSON.parse(line).name)).toEqual(['default']);
  });
});

describe('a server killed with SIGKILL', () => {
  it('leaves a stale lock that does not block the next start', { timeout: TIMEOUT_MS }, async () => {
    const dataDir = await dataFolder();
    const killed = await startServer(dataDir);
    await waitUntilReady(killed);
    const token = killed.output().match(TOKEN_LINE)![1]!;
    killed.child.kill('SIGKILL');
    expect(await killed.exited).toEqual({ code: null, signal: 'SIGKILL' });
    expect(JSON.parse(await readFile(join(dataDir, 'service.lock'), 'utf8'))).toMatchObject({ pid: killed.child.pid });

    const next = await startServer(dataDir);
    await waitUntilReady(next);
    expect((await fetch(`${next.baseUrl}/v1/spaces`, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
    expect(JSON.parse(await readFile(join(dataDir, 'service.lock'), 'utf8'))).toMatchObject({ pid: next.child.pid });
    next.child.kill('SIGTERM');
    expect(await next.exited).toEqual({ code: 0, signal: null });
  });
});
