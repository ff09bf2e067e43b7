// A start that cannot reach its database fails in one line on stderr, exit 1: what is wrong (host
// and port, database, user) and the variable to change; no stack unless LOG_LEVEL=debug, and never
// the URL's password. The server and the admin command say it the same way.
import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { withDatabase } from '../support/backend.js';
import { type CommandResult, freePort, runNodeScript } from '../support/service-process.js';

const TIMEOUT_MS = 60_000;
const PASSWORD = 'pa55-w0rd%21secret';

const startServer = (env: Record<string, string>): Promise<CommandResult> =>
  runNodeScript('src/server.ts', [], { HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env });

/** The server's output holds that line on stderr, and nothing else there: no stack, no password. */
function expectOneLine(result: CommandResult, line: string): void {
  expect(result.code).toBe(1);
  expect(result.stderr).toBe(`${line}\n`);
  expect(result.stdout + result.stderr).not.toContain('pa55');
  expect(result.stdout + result.stderr).not.toMatch(/^\s+at /m);
}

let closedPort: number;
// Accepts connections and never answers: a database that hangs (or a firewall that swallows packets).
let silent: Server;
const silentSockets = new Set<Socket>();
beforeAll(async () => {
  closedPort = await freePort();
  silent = createServer((socket) => {
    silentSockets.add(socket);
    socket.on('error', () => {});
  });
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
});
afterAll(async () => {
  for (const socket of silentSockets) socket.destroy();
  await new Promise((resolve) => silent.close(resolve));
});

describe('start-up with a DATABASE_URL it cannot use', () => {
  it('connection refused: names host:port and DATABASE_URL', { timeout: TIMEOUT_MS }, async () => {
    const result = await startServer({ DATABASE_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${closedPort}/sessions` });
    expectOneLine(result, `Cannot reach PostgreSQL at 127.0.0.1:${closedPort} (connection refused): check DATABASE_URL, or start PostgreSQL.`);
  });

  it('a host name that does not resolve', { timeout: TIMEOUT_MS }, async () => {
    const result = await startServer({ DATABASE_URL: `postgres://svc:${PASSWORD}@no-such-host.invalid:5432/sessions` });
    expectOneLine(result, 'Cannot reach PostgreSQL at no-such-host.invalid:5432 (the host name no-such-host.invalid does not resolve): check DATABASE_URL.');
  });

  it('a server that never answers: the connect timeout', { timeout: TIMEOUT_MS }, async () => {
    const port = (silent.address() as { port: number }).port;
    const result = await startServer({ DATABASE_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${port}/sessions`, DB_CONNECT_TIMEOUT_MS: '300' });
    expectOneLine(result, `Cannot reach PostgreSQL at 127.0.0.1:${port} (no answer within DB_CONNECT_TIMEOUT_MS): check DATABASE_URL, or raise DB_CONNECT_TIMEOUT_MS.`);
  });

  it('DATABASE_DIRECT_URL is named when the migrations\' direct connection is the one that fails', { timeout: TIMEOUT_MS }, async () => {
    const result = await startServer({
      DATABASE_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${closedPort}/sessions`,
      DATABASE_DIRECT_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${closedPort}/sessions`,
    });
    expectOneLine(result, `Cannot reach PostgreSQL at 127.0.0.1:${closedPort} (connection refused): check DATABASE_DIRECT_URL, or start PostgreSQL.`);
  });

  it('with LOG_LEVEL=debug the stack follows the line, still without the password', { timeout: TIMEOUT_MS }, async () => {
    const result = await startServer({ DATABASE_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${closedPort}/sessions`, LOG_LEVEL: 'debug' });
    expect(result.code).toBe(1);
    const [first, ...rest] = result.stderr.split('\n');
    expect(first).toBe(`Cannot reach PostgreSQL at 127.0.0.1:${closedPort} (connection refused): check DATABASE_URL, or start PostgreSQL.`);
    expect(rest.join('\n')).toMatch(/^\s+at /m);
    expect(rest.join('\n')).toContain('ECONNREFUSED');
    expect(result.stdout + result.stderr).not.toContain('pa55');
  });

  it('the admin command says the same in one line, exit 1', { timeout: TIMEOUT_MS }, async () => {
    const result = await runNodeScript('src/cli/admin.ts', ['list-accounts'], { DATABASE_URL: `postgres://svc:${PASSWORD}@127.0.0.1:${closedPort}/sessions` });
    expectOneLine(result, `Cannot reach PostgreSQL at 127.0.0.1:${closedPort} (connection refused): check DATABASE_URL, or start PostgreSQL.`);
    expect(result.stdout).toBe('');
  });
});

const backend = inject('testBackend');

// Failures only a real PostgreSQL server gives.
describe.runIf(backend.kind === 'postgres')('start-up against a PostgreSQL server that refuses', () => {
  const adminUrl = backend.kind === 'postgres' ? backend.adminUrl : 'postgres://unused';
  const { hostname, port } = new URL(adminUrl);

  it('a database that does not exist', { timeout: TIMEOUT_MS }, async () => {
    const result = await startServer({ DATABASE_URL: withDatabase(adminUrl, 'ass_no_such_database') });
    expectOneLine(result, `PostgreSQL at ${hostname}:${port || '5432'} has no database "ass_no_such_database": create it, or check DATABASE_URL.`);
  });

  it('a user that does not exist', { timeout: TIMEOUT_MS }, async () => {
    const url = new URL(adminUrl);
    url.username = 'ass_no_such_role';
    url.password = PASSWORD;
    const result = await startServer({ DATABASE_URL: url.toString() });
    expectOneLine(result, `PostgreSQL at ${hostname}:${port || '5432'} refused user "ass_no_such_role" (role "ass_no_such_role" does not exist): check DATABASE_URL.`);
  });
});
