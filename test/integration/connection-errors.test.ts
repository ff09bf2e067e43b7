// Issue 10: the answers Node writes before a route runs (431 oversize headers, 400 malformed HTTP)
// and the 503 of the shutdown drain come in the error envelope, the 503 with Retry-After. A real
// listening server and raw TCP sockets, since app.inject never goes through Node's HTTP parser.
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/test-app.js';

const ENVELOPE = { error: { code: expect.any(String), message: expect.any(String), requestId: expect.any(String) } };

interface RawClient {
  socket: net.Socket;
  received(): string;
  closed: Promise<void>;
}

function connect(port: number): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = '';
    socket.on('data', (chunk) => (data += chunk.toString('utf8')));
    socket.on('error', () => {}); // the server closes these connections on purpose
    const closed = new Promise<void>((done) => socket.on('close', () => done()));
    socket.once('connect', () => resolve({ socket, received: () => data, closed }));
    socket.once('error', reject);
  });
}

/** The HTTP responses in `raw`, in order: status, lower-cased headers, and the JSON body. */
function responses(raw: string): { status: number; headers: Record<string, string>; body: unknown }[] {
  const out = [];
  let rest = raw;
  while (rest.startsWith('HTTP/1.1 ')) {
    const headEnd = rest.indexOf('\r\n\r\n');
    const [statusLine, ...lines] = rest.slice(0, headEnd).split('\r\n');
    const headers = Object.fromEntries(lines.map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length']);
    const bodyBytes = Buffer.from(rest.slice(headEnd + 4), 'utf8').subarray(0, length);
    out.push({ status: Number(statusLine!.split(' ')[1]), headers, body: JSON.parse(bodyBytes.toString('utf8')) as unknown });
    rest = Buffer.from(rest.slice(headEnd + 4), 'utf8').subarray(length).toString('utf8');
  }
  return out;
}

describe('answers before routing', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await createTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => t?.close());

  it('answers oversize headers (over Node\'s 16 KiB) with 431 LimitExceeded.RequestHeaders in the envelope', async () => {
    const client = await connect(port);
    client.socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
    await client.closed;
    const [answer, ...more] = responses(client.received());
    expect(more).toEqual([]);
    expect(answer!.status).toBe(431);
    expect(answer!.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(answer!.body).toEqual(ENVELOPE);
    expect((answer!.body as typeof ENVELOPE).error.code).toBe('LimitExceeded.RequestHeaders');
    expect(answer!.headers['x-request-id']).toBe((answer!.body as { error: { requestId: string } }).error.requestId);
  });

  it('answers malformed HTTP with 400 InvalidParameter in the envelope', async () => {
    const client = await connect(port);
    client.socket.write('GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    await client.closed;
    const [answer] = responses(client.received());
    expect(answer!.status).toBe(400);
    expect(answer!.body).toEqual(ENVELOPE);
    expect((answer!.body as typeof ENVELOPE).error.code).toBe('InvalidParameter');
  });
});

describe('the shutdown drain', () => {
  it('answers a request that arrives during close() with 503 ResourceUnavailable.ShuttingDown, Retry-After and the envelope, while the request in flight finishes', async () => {
    const t = await createTestApp();
    try {
      await t.app.listen({ port: 0, host: '127.0.0.1' });
      const port = (t.app.server.address() as AddressInfo).port;
      const client = await connect(port);
      const body = JSON.stringify({ name: 'in flight at shutdown' });
      const headers = (length: number) => `Host: x\r\nAuthorization: Bearer ${t.account.rootCredential.token}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
      // The first request is in flight: its headers are in, half of its body is not.
      client.socket.write(`POST /v1/spaces HTTP/1.1\r\n${headers(Buffer.byteLength(body))}${body.slice(0, 10)}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const closing = t.app.close();
      await new Promise((resolve) => setTimeout(resolve, 100));
      // The rest of its body, and a second request pipelined behind it, which arrives while the app drains.
      client.socket.write(`${body.slice(10)}GET /v1/spaces HTTP/1.1\r\n${headers(0)}`);
      await client.closed;
      await closing;
      const [first, second, ...more] = responses(client.received());
      expect(more).toEqual([]);
      expect(first!.status).toBe(201);
      expect(second!.status).toBe(503);
      expect(second!.headers['retry-after']).toBe('1');
      expect(second!.headers.connection).toBe('close');
      expect(second!.body).toEqual(ENVELOPE);
      expect((second!.body as typeof ENVELOPE).error.code).toBe('ResourceUnavailable.ShuttingDown');
    } finally {
      await t.app.close();
      await t.database.dispose();
    }
  });
});
