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
  /** socket.bytesRead when it last became idle: more means a request is arriving. */
  bytesReadWhenIdle: number;
}

/** The response Node is writing on a socket (none while the connection is idle): ServerResponse's own link. */
const responseOn = (socket: Socket): ServerResponse | undefined => (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage ?? undefined;

/**
 * Tracks the server's connections and makes its closeIdleConnections() (what server.close() calls)
 * begin the drain described above instead of destroying idle connections at once. Call before
 * listen. Until the drain begins it costs one Set entry per connection and nothing per request (the
 * append path's CPU is measured, issue 24): requests are followed from the drain on.
 */
export function drainConnectionsOnClose(server: Server, { graceMs = IDLE_CONNECTION_GRACE_MS }: { graceMs?: number } = {}): void {
  const sockets = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });

  let draining = false;
  server.closeIdleConnections = () => {
    if (draining) return;
    draining = true;
    const startedAt = Date.now();
    const connections = new Map<Socket, Connection>();
    const connectionOf = (socket: Socket): Connection => {
      let connection = connections.get(socket);
      if (!connection) {
        connection = { requests: 0, idleSince: startedAt, bytesReadWhenIdle: socket.bytesRead };
        connections.set(socket, connection);
      }
      return connection;
    };
    const follow = (socket: Socket, response: ServerResponse) => {
      const connection = connectionOf(socket);
      connection.requests += 1;
      closeAfter(response);
      response.once('close', () => {
        connection.requests -= 1;
        if (connection.requests > 0) return;
        connection.idleSince = Date.now();
        connection.bytesReadWhenIdle = socket.bytesRead;
      });
    };
    for (const socket of sockets) {
      const response = responseOn(socket);
      if (response) follow(socket, response);
      else connectionOf(socket);
    }
    // Before the app's own listener: a request that arrives in the drain is marked before it is routed.
    server.prependListener('request', (request: IncomingMessage, response: ServerResponse) => follow(request.socket, response));

    const isIdle = (socket: Socket) => {
      const connection = connectionOf(socket);
      return connection.requests === 0 && socket.bytesRead === connection.bytesReadWhenIdle && !socket.destroyed;
    };
    const closeIdleAfterGrace = () => {
      const now = Date.now();
      const expired = [...sockets].filter((socket) => isIdle(socket) && now - connectionOf(socket).idleSince >= graceMs);
      if (expired.length === 0) return;
      // Timers run before the event loop reads the sockets: a request that arrived while this process
      // was busy is read (and parsed) before setImmediate's callback runs, and then keeps its connection.
      setImmediate(() => {
        for (const socket of expired) if (isIdle(socket)) socket.destroy();
      });
    };
    const sweep = setInterval(closeIdleAfterGrace, SWEEP_INTERVAL_MS).unref();
    server.once('close', () => clearInterval(sweep));
  };
}

function closeAfter(response: ServerResponse): void {
  if (!response.headersSent) response.setHeader('connection', 'close');
}
