// Closing the keep-alive connections of a draining server without cutting off a request on its way.
//
// Node's server.close() destroys at once every connection with no request being parsed
// (closeIdleConnections). On a keep-alive connection the client's next request may already sit in
// the socket's buffer, or be on the wire: destroying the socket resets it unanswered, and the client
// cannot tell that from an answer lost after the request ran, so it must not resend a call that is
// not repeatable. The drain instead
// - marks every response not yet begun `Connection: close`: Node closes the connection once it is
//   written, and the client opens no further request on it;
// - leaves a connection that is idle open for a grace period, so that a request already sent on it
//   arrives and is answered (a 503 ResourceUnavailable.ShuttingDown with `Connection: close`, which
//   the client may retry), and only then closes it;
// - ends when the server's last connection has closed; server.ts bounds the whole shutdown.
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';

/**
 * How long a connection stays open once it is idle in the drain: longer than a client between two
 * calls on a busy connection, or a request on its way over a network, takes.
 */
export const IDLE_CONNECTION_GRACE_MS = 500;
const SWEEP_INTERVAL_MS = 50;

interface Connection {
  requests: number;
  idleSince: number;
  /** socket.bytesRead when the last request ended: more means a request is arriving. */
  bytesReadWhenIdle: number;
}

/**
 * Tracks the server's connections and makes its closeIdleConnections() (what server.close() calls)
 * begin the drain described above instead of destroying idle connections at once. Call before listen.
 */
export function drainConnectionsOnClose(server: Server, { graceMs = IDLE_CONNECTION_GRACE_MS }: { graceMs?: number } = {}): void {
  const connections = new Map<Socket, Connection>();
  const responses = new Set<ServerResponse>();
  let drainStartedAt: number | undefined;

  server.on('connection', (socket: Socket) => {
    connections.set(socket, { requests: 0, idleSince: Date.now(), bytesReadWhenIdle: 0 });
    socket.once('close', () => connections.delete(socket));
  });
  // Before the app's own listener: a request that arrives in the drain is marked before it is routed.
  server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket;
    const connection = connections.get(socket);
    if (connection) connection.requests += 1;
    responses.add(response);
    if (drainStartedAt !== undefined) closeAfter(response);
    response.once('close', () => {
      responses.delete(response);
      if (!connection) return;
      connection.requests -= 1;
      if (connection.requests === 0) {
        connection.idleSince = Date.now();
        connection.bytesReadWhenIdle = socket.bytesRead;
      }
    });
  });

  const closeIdleAfterGrace = (since: number) => {
    const now = Date.now();
    const expired = [...connections].filter(([socket, c]) => isIdle(socket, c) && now - Math.max(c.idleSince, since) >= graceMs);
    if (expired.length === 0) return;
    // Timers run before the event loop reads the sockets: a request that arrived while this process
    // was busy is read (and parsed) before setImmediate's callback runs, and then keeps its connection.
    setImmediate(() => {
      for (const [socket, c] of expired) if (isIdle(socket, c)) socket.destroy();
    });
  };

  server.closeIdleConnections = () => {
    if (drainStartedAt !== undefined) return;
    drainStartedAt = Date.now();
    for (const response of responses) closeAfter(response);
    const sweep = setInterval(closeIdleAfterGrace, SWEEP_INTERVAL_MS, drainStartedAt).unref();
    server.once('close', () => clearInterval(sweep));
  };
}

function isIdle(socket: Socket, connection: Connection): boolean {
  return connection.requests === 0 && socket.bytesRead === connection.bytesReadWhenIdle && !socket.destroyed;
}

function closeAfter(response: ServerResponse): void {
  if (!response.headersSent) response.setHeader('connection', 'close');
}
