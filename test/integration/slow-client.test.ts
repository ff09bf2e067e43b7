// Slow clients cannot hold the server (slowloris): a real listening server, raw TCP sockets.
// The timeouts are small here so the file runs in a few seconds; the bounds below allow for
// Node's checking interval (a quarter of the headers timeout) and a loaded 2-core machine.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { DEFAULT_LIMITS, loadConfig } from '../../src/config.js';
import { createTestApp, type TestApp, TEST_PAGE_TOKEN_KEY } from '../support/test-app.js';

const HEADERS_TIMEOUT_MS = 500;
const REQUEST_TIMEOUT_MS = 1_200;
const KEEP_ALIVE_TIMEOUT_MS = 300;
/** Node closes an idle keep-alive socket this long after the advertised keep-alive timeout. */
const NODE_KEEP_ALIVE_GRACE_MS = 1_000;
/** Scheduling slack on a busy machine, on top of the checking interval. */
const SLACK_MS = 1_000;
const CHECK_INTERVAL_MS = HEADERS_TIMEOUT_MS / 4;

let t: TestApp;
let port: number;

beforeAll(async () => {
  t = await createTestApp({
    limits: { headersTimeoutMs: HEADERS_TIMEOUT_MS, requestTimeoutMs: REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: KEEP_ALIVE_TIMEOUT_MS },
  });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  port = (t.app.server.address() as AddressInfo).port;
});
afterAll(async () => t?.close());

interface RawClient {
  socket: net.Socket;
  /** Everything the server sent so far. */
  received(): string;
  /** Resolves when the server closes the connection: milliseconds since it was opened. */
  closed: Promise<number>;
  /** Bytes the client managed to send before it was cut off. */
  sent(): number;
}

function connect(): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const openedAt = Date.now();
    let data = '';
    let sentBytes = 0;
    const write = socket.write.bind(socket);
    socket.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      sentBytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length;
      return write(chunk, ...rest);
    }) as typeof socket.write;
    socket.on('data', (chunk) => (data += chunk.toString('latin1')));
    socket.on('error', () => {}); // a reset after the server cuts the connection is expected
    const closed = new Promise<number>((done) => socket.on('close', () => done(Date.now() - openedAt)));
    socket.once('connect', () => resolve({ socket, received: () => data, closed, sent: () => sentBytes }));
    socket.once('error', reject);
  });
}

/** Writes `text` one byte every `everyMs` until the socket closes or the text runs out. */
function trickle(client: RawClient, text: string, everyMs: number): () => void {
  let index = 0;
  const timer = setInterval(() => {
    if (client.socket.destroyed || index >= text.length) return clearInterval(timer);
    client.socket.write(text[index++]!);
  }, everyMs);
  return () => clearInterval(timer);
}

/** One ordinary request on its own connection: status and how long it took. */
async function normalRequest(): Promise<{ status: number; ms: number }> {
  const started = Date.now();
  const res = await fetch(`http://127.0.0.1:${port}/healthz`);
  await res.text();
  return { status: res.status, ms: Date.now() - started };
}

const statusLine = (raw: string) => raw.split('\r\n')[0];

describe('slow clients', () => {
  it('cuts off clients that send their headers byte by byte, with 408, while serving others', async () => {
    // Twenty slowloris connections, 20 bytes per second each: the headers are still incomplete
    // when the headers timeout passes.
    const slow = await Promise.all(Array.from({ length: 20 }, () => connect()));
    const stops = slow.map((client) => trickle(client, `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ${'a'.repeat(200)}\r\n\r\n`, 50));
    const other = await normalRequest();
    const closedAfter = await Promise.all(slow.map((client) => client.closed));
    stops.forEach((stop) => stop());
    expect(other.status).toBe(200);
    // The other connection was answered while the slow ones were still open, not after they were cut.
    expect(other.ms).toBeLessThan(Math.min(...closedAfter));
    for (const [index, client] of slow.entries()) {
      expect(client.sent()).toBeGreaterThan(5); // it kept sending: activity does not reset the deadline
      expect(statusLine(client.received())).toBe('HTTP/1.1 408 Request Timeout');
      expect(closedAfter[index]).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
      expect(closedAfter[index]).toBeLessThan(HEADERS_TIMEOUT_MS + CHECK_INTERVAL_MS + SLACK_MS);
    }
  });

  it('cuts off a connection that never sends anything after the headers timeout', async () => {
    const idle = await connect();
    const closedAfter = await idle.closed;
    expect(statusLine(idle.received())).toBe('HTTP/1.1 408 Request Timeout');
    expect(closedAfter).toBeGreaterThanOrEqual(HEADERS_TIMEOUT_MS - 50);
    expect(closedAfter).toBeLessThan(HEADERS_TIMEOUT_MS + CHECK_INTERVAL_MS + SLACK_MS);
  });

  it('cuts off a client that trickles its body, with 408, and writes nothing', async () => {
    const spacesBefore = await countSpaces();
    const slow = await connect();
    const body = JSON.stringify({ name: 'never-created', description: 'x'.repeat(400) });
    slow.socket.write(
      `POST /v1/spaces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.account.rootCredential.token}\r\n` +
        `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n`,
    );
    const headerBytes = slow.sent();
    const stop = trickle(slow, body, 50);
    const others = await Promise.all([normalRequest(), normalRequest()]);
    const closedAfter = await slow.closed;
    stop();
    for (const other of others) {
      expect(other.status).toBe(200);
      expect(other.ms).toBeLessThan(closedAfter);
    }
    expect(slow.sent() - headerBytes).toBeGreaterThan(5); // body bytes kept coming
    expect(slow.sent() - headerBytes).toBeLessThan(Buffer.byteLength(body)); // but not all of them
    expect(statusLine(slow.received())).toBe('HTTP/1.1 408 Request Timeout');
    // The request timeout counts from the start of the request, headers included.
    expect(closedAfter).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
    expect(closedAfter).toBeLessThan(REQUEST_TIMEOUT_MS + CHECK_INTERVAL_MS + SLACK_MS);
    expect(await countSpaces()).toBe(spacesBefore);
  });

  it('closes an idle keep-alive connection after the keep-alive timeout', async () => {
    const client = await connect();
    client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\n\r\n');
    const answeredAt = await new Promise<number>((resolve) => {
      client.socket.once('data', () => resolve(Date.now()));
    });
    const closedAt = await client.closed.then(() => Date.now());
    expect(statusLine(client.received())).toBe('HTTP/1.1 200 OK');
    expect(client.received()).toMatch(/\r\nconnection: keep-alive\r\n/i);
    const idleMs = closedAt - answeredAt;
    expect(idleMs).toBeGreaterThanOrEqual(KEEP_ALIVE_TIMEOUT_MS - 50);
    expect(idleMs).toBeLessThan(KEEP_ALIVE_TIMEOUT_MS + NODE_KEEP_ALIVE_GRACE_MS + SLACK_MS);
  });

  it('keeps a keep-alive connection that is reused in time', async () => {
    const client = await connect();
    const request = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
    const answers = () => client.received().match(/HTTP\/1\.1 200 OK/g)?.length ?? 0;
    const waitForAnswers = async (count: number) => {
      const deadline = Date.now() + 5_000;
      while (answers() < count && !client.socket.destroyed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    };
    client.socket.write(request);
    await waitForAnswers(1);
    await new Promise((resolve) => setTimeout(resolve, KEEP_ALIVE_TIMEOUT_MS / 2));
    expect(client.socket.destroyed).toBe(false);
    client.socket.write(request);
    await waitForAnswers(2);
    expect(answers()).toBe(2);
    client.socket.destroy();
  });
});

describe('timeout configuration', () => {
  it('applies the configured timeouts to the HTTP server', async () => {
    const config = loadConfig({ HTTP_HEADERS_TIMEOUT_MS: '4000', HTTP_REQUEST_TIMEOUT_MS: '9000', HTTP_KEEP_ALIVE_TIMEOUT_MS: '2500' });
    const app = await buildApp({ db: t.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: config.limits });
    try {
      expect(app.server.headersTimeout).toBe(4000);
      expect(app.server.requestTimeout).toBe(9000);
      expect(app.server.keepAliveTimeout).toBe(2500);
    } finally {
      await app.close();
    }
  });

  it('uses 10 s for headers, 30 s for a whole request and 5 s for keep-alive by default', async () => {
    const app = await buildApp({ db: t.db, pageTokenKey: TEST_PAGE_TOKEN_KEY, limits: DEFAULT_LIMITS });
    try {
      expect([app.server.headersTimeout, app.server.requestTimeout, app.server.keepAliveTimeout]).toEqual([10_000, 30_000, 5_000]);
    } finally {
      await app.close();
    }
  });
});

async function countSpaces(): Promise<number> {
  const row = await t.db
    .selectFrom('session_spaces')
    .select((eb) => eb.fn.countAll<number>().as('count'))
    .where('account_id', '=', t.account.accountId)
    .executeTakeFirstOrThrow();
  return Number(row.count);
}
