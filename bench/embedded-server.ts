// The embedded server (PGlite in DATA_DIR, DATABASE_URL unset) as `npm start` runs it for a new user,
// for the benchmarks that put its figures beside PostgreSQL's: a fresh data folder, an account made by
// the admin CLI of the same checkout, 100 sessions, session 0 holding 100 events.
import { type ChildProcess, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { type HttpClient, keepAliveClient } from './http-client.js';
import { freePort, startServer, stopServer, waitReady } from './server-process.js';

export const SESSIONS = 100;
export const CONTEXT_EVENTS = 100;
/** This checkout's root. */
export const HERE = fileURLToPath(new URL('..', import.meta.url));

export interface EmbeddedServer {
  label: string;
  process: ChildProcess;
  dataDir: string;
  base: string;
  spaceId: string;
  headers: Record<string, string>;
  client: HttpClient;
  acknowledged: number;
  /** Appends autocannon may have left in flight when its runs stopped (its connections, summed over runs). */
  inFlightAtMost: number;
}

/** The account is created by the admin CLI of the same checkout, before its server holds the folder. */
function createAccount(root: string, dataDir: string): { defaultSpaceId: string; token: string } {
  const { DATABASE_URL: _unused, ...env } = process.env;
  const run = spawnSync(process.execPath, ['--import', 'tsx', 'src/cli/admin.ts', 'create-account', '--name', 'bench'], {
    cwd: root,
    env: { ...env, DATA_DIR: dataDir, LOG_LEVEL: 'warn' },
    encoding: 'utf8',
  });
  if (run.status !== 0) throw new Error(`create-account in ${root} failed: ${run.stderr}`);
  return JSON.parse(run.stdout) as { defaultSpaceId: string; token: string };
}

export async function startEmbedded(label: string, root: string): Promise<EmbeddedServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'ass-bench-embedded-'));
  const account = createAccount(root, dataDir);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = startServer(undefined, port, { root, env: { DATA_DIR: dataDir } });
  await waitReady(base, child);
  const headers = { authorization: `Bearer ${account.token}` };
  const server: EmbeddedServer = { label, process: child, dataDir, base, spaceId: account.defaultSpaceId, headers, client: keepAliveClient(base, headers), acknowledged: 0, inFlightAtMost: 0 };
  for (let i = 0; i < SESSIONS; i++) await expect(server, 'POST', `${userPath(server, i)}`, { sessionId: sessionOf(i).sessionId }, 201);
  for (let k = 0; k < CONTEXT_EVENTS / 10; k++) {
    await expect(server, 'POST', `${sessionPath(server, 0)}/events`, { events: Array.from({ length: 10 }, (_, j) => event(k * 10 + j)) }, 201);
    server.acknowledged += 10;
  }
  return server;
}

export const sessionOf = (i: number) => ({ userId: `user-${i % 10}`, sessionId: `session-${i}` });
export const userPath = (server: EmbeddedServer, i: number) => `/v1/spaces/${server.spaceId}/users/${sessionOf(i).userId}/sessions`;
export const sessionPath = (server: EmbeddedServer, i: number) => `${userPath(server, i)}/${sessionOf(i).sessionId}`;
export const event = (n: number) => ({
  author: 'agent',
  content: { role: 'model', parts: [{ text: `turn ${n}: the quick brown fox jumps over the lazy dog` }] },
  actions: { stateDelta: { counter: n } },
});

export async function expect(server: EmbeddedServer, method: string, path: string, body: unknown, status: number): Promise<string> {
  const answer = await server.client.request(method, path, body);
  if (answer.status !== status) throw new Error(`${server.label}: ${method} ${path} answered ${answer.status}: ${answer.body}`);
  return answer.body;
}

export async function appendThroughput(server: EmbeddedServer, seconds: number, connections = CONNECTIONS): Promise<{ perSecond: number; failed: number }> {
  let n = 0;
  server.inFlightAtMost += connections;
  const result = await autocannon({
    url: server.base,
    connections,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        headers: { ...server.headers, 'content-type': 'application/json' },
        setupRequest: (request) => ({ ...request, path: `${sessionPath(server, 1 + (n % (SESSIONS - 1)))}/events`, body: JSON.stringify(event(n++)) }),
        onResponse: (status) => {
          if (status === 201) server.acknowledged += 1;
        },
      },
    ],
  });
  return { perSecond: result.requests.total / result.duration, failed: result.non2xx + result.errors };
}

/** Events stored in all sessions, read back through the API (the listing's totals). */
export async function storedEvents(server: EmbeddedServer): Promise<number> {
  let total = 0;
  for (let i = 0; i < SESSIONS; i++) {
    const described = JSON.parse(await expect(server, 'GET', sessionPath(server, i), undefined, 200)) as { eventCount?: number; lastSeq?: number };
    total += described.eventCount ?? described.lastSeq ?? 0;
  }
  return total;
}

/** Stops the server and removes its data folder. */
export async function stopEmbedded(server: EmbeddedServer): Promise<void> {
  server.client.close();
  await stopServer(server.process);
  rmSync(server.dataDir, { recursive: true, force: true });
}

/** Appends autocannon sends at once by default (PGlite has one connection: this measures the queue in front of it). */
export const CONNECTIONS = 8;
