// The embedded mode's first start creates the credential master key in its data directory (mode
// 0600), so the root credential it prints signs API 3.0 requests at once; later starts reuse the
// key. The server runs as a real process (src/server.ts) and the official SDK drives it. This file
// starts PGlite processes of its own whatever the backend under test (the mode is PGlite only).
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CREDENTIAL_MASTER_KEY_FILE } from '../../src/credential-master-key.js';
import { type ServiceProcess, freePort, startServiceProcess, waitUntilReady } from '../support/service-process.js';
import { sdkClient } from '../support/tencent-client.js';

const TOKEN_LINE = /export TOKEN=(AKID[A-Za-z0-9]{32})\.([A-Za-z0-9_-]{43,})/;

let dataDir: string;
const running: ServiceProcess[] = [];
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'ass-tencent-embedded-'));
});
afterAll(async () => {
  for (const server of running) if (server.alive()) server.child.kill('SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
});

async function start(): Promise<{ server: ServiceProcess; endpoint: string }> {
  const port = await freePort();
  // CREDENTIAL_MASTER_KEY from the developer's shell must not leak in: empty means unset.
  const server = startServiceProcess({ DATA_DIR: dataDir, PORT: String(port), CREDENTIAL_MASTER_KEY: '' });
  running.push(server);
  await waitUntilReady(server);
  return { server, endpoint: `127.0.0.1:${port}` };
}

async function stop(server: ServiceProcess) {
  server.child.kill('SIGTERM');
  return server.exited;
}

describe('the embedded mode and the Tencent Cloud SDK', () => {
  it('creates the master key on the first start, so the printed credential signs requests; the next start reuses it', async () => {
    const first = await start();
    const [, secretId, secretKey] = TOKEN_LINE.exec(first.server.output())!;
    const keyFile = join(dataDir, CREDENTIAL_MASTER_KEY_FILE);
    expect((await stat(keyFile)).mode & 0o777).toBe(0o600);
    const key = await readFile(keyFile, 'utf8');
    expect(Buffer.from(key.trim(), 'base64')).toHaveLength(32);

    const client = sdkClient(first.endpoint, { secretId: secretId!, secretKey: secretKey! });
    const created = (await client.request('CreateSessionSpace', { Name: 'embedded' })) as { SessionSpace: { SpaceId: string } };
    expect(created.SessionSpace.SpaceId).toMatch(/^space-/);
    expect(first.server.output()).not.toContain(key.trim());
    expect(await stop(first.server)).toEqual({ code: 0, signal: null });

    const second = await start();
    expect(await readFile(keyFile, 'utf8')).toBe(key);
    const again = sdkClient(second.endpoint, { secretId: secretId!, secretKey: secretKey! });
    const listed = (await again.request('DescribeSessionSpaces', {})) as { TotalCount: number };
    expect(listed.TotalCount).toBe(2); // the default space and "embedded"
    expect(await stop(second.server)).toEqual({ code: 0, signal: null });
  }, 180_000);
});
