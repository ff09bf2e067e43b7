// LISTEN for one channel, with the one thing a cache built on it needs to know: from when to when
// every notification is delivered. onListening marks the start of such a stretch, onLost its end.
//
// On PostgreSQL a dedicated connection listens (outside the pool: it is held for the life of the
// instance and must not take a request's place). When it is lost, it reconnects with backoff; a
// heartbeat finds a connection that died silently. On PGlite there is one database session, and a
// notification raised by any statement comes back on the pool's one connection, inside the answer
// to the committing statement (PGlite's own `listen()` callbacks do not see statements sent through
// the socket server: tried, they never fire). So there the pool's connection listens, and delivery
// is synchronous with the commit.
import pg from 'pg';
import { hasUnansweredStatement } from './guarded-pool.js';

export interface NotificationHandlers {
  /** LISTEN is in effect (again): from now on, every notification on the channel is delivered. */
  onListening(): void;
  onNotification(payload: string): void;
  /** Notifications may be missed from now until the next onListening. */
  onLost(error: Error | undefined): void;
}

export interface NotificationSubscription {
  /**
   * Resolves once every notification committed before the call has been handed to onNotification
   * (or at once, while not listening). Costs one round trip on the listening connection.
   */
  catchUp(): Promise<void>;
  /** The listening backend's pid on PostgreSQL (operators, tests); undefined while not listening or on PGlite. */
  readonly backendPid: number | undefined;
  close(): Promise<void>;
}

export type Listen = (channel: string, handlers: NotificationHandlers) => NotificationSubscription;

export interface ListenerOptions {
  /** Connection settings of the dedicated client (no pool settings). */
  client: pg.ClientConfig;
  /** First and longest pause between reconnection attempts. */
  retryMinMs?: number;
  retryMaxMs?: number;
  /** A round trip this often proves the connection alive; a silent network cut is found within it. */
  heartbeatMs?: number;
}

const quoted = (channel: string) => pg.escapeIdentifier(channel);

/** PostgreSQL: a dedicated client listens; lost, it reconnects until closed. */
export function listenOnDedicatedClient(channel: string, handlers: NotificationHandlers, options: ListenerOptions): NotificationSubscription {
  const { retryMinMs = 100, retryMaxMs = 5_000, heartbeatMs = 10_000 } = options;
  let closed = false;
  let current: { client: pg.Client; pid: number } | undefined;
  let connecting: pg.Client | undefined;
  let attempt = 0;
  let retryTimer: NodeJS.Timeout | undefined;

  const lose = (client: pg.Client, error: Error | undefined) => {
    if (current?.client !== client) return;
    current = undefined;
    handlers.onLost(error);
    client.end().catch(() => {});
    scheduleConnect();
  };

  const scheduleConnect = () => {
    if (closed || retryTimer) return;
    const delay = attempt === 0 ? 0 : Math.min(retryMaxMs, retryMinMs * 2 ** (attempt - 1)) * (0.5 + Math.random() / 2);
    attempt++;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      void connect();
    }, delay);
    retryTimer.unref();
  };

  const connect = async () => {
    const client = new pg.Client(options.client);
    connecting = client;
    client.on('error', (error) => lose(client, error));
    client.on('end', () => lose(client, undefined));
    client.on('notification', (message) => {
      if (current?.client === client && message.channel === channel) handlers.onNotification(message.payload ?? '');
    });
    try {
      await client.connect();
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await client.query(`LISTEN ${quoted(channel)}`);
      if (closed) throw new Error('closed');
      connecting = undefined;
      current = { client, pid: rows[0]!.pid };
      attempt = 0;
      handlers.onListening();
    } catch {
      connecting = undefined;
      await client.end().catch(() => {});
      scheduleConnect();
    }
  };

  // One round trip at a time on the listening connection: the catch-ups of concurrent credential
  // changes and the heartbeat would otherwise hand pg a query while another is running. Each waits
  // for the one before it and is sent after its caller's commit, which is what a catch-up needs.
  let lastRoundTrip: Promise<void> = Promise.resolve();
  const roundTrip = (listening: { client: pg.Client }): Promise<void> => {
    lastRoundTrip = lastRoundTrip.then(() =>
      listening.client.query('SELECT 1').then(
        () => undefined,
        (error: Error) => lose(listening.client, error),
      ),
    );
    return lastRoundTrip;
  };

  const heartbeat = setInterval(() => {
    if (current) void roundTrip(current);
  }, heartbeatMs);
  heartbeat.unref();
  scheduleConnect();

  return {
    get backendPid() {
      return current?.pid;
    },
    async catchUp() {
      const listening = current;
      if (!listening) return;
      // The committing backend signals listeners before its client sees COMMIT's answer, and a
      // backend sends the notifications it was signalled about before it answers the next query.
      await roundTrip(listening);
    },
    async close() {
      closed = true;
      clearInterval(heartbeat);
      clearTimeout(retryTimer);
      const clients = [current?.client, connecting].filter((client) => client !== undefined);
      current = undefined;
      await Promise.all(clients.map((client) => client.end().catch(() => {})));
    },
  };
}

/** The PGlite side: `listen` for subscribers, `onConnect` for the pool to call on each new connection. */
export interface SingleSessionListener {
  listen: Listen;
  /**
   * LISTENs on a new connection for every subscribed channel, before it serves anything: pg-pool's
   * onConnect hook awaits it, so no statement of the pool runs on the connection first.
   */
  onConnect(client: pg.ClientBase): Promise<void>;
}

/**
 * PGlite: LISTEN on the pool's one connection, again on each new connection (the session may keep
 * it, but a repeat costs nothing). A notification comes back inside the answer to the statement
 * that committed it, so one is missed only when a connection ends with a statement unanswered (an
 * error, a destroyed connection); the pool closing an idle connection misses nothing (no statement
 * runs until the next connection listens), and is not a loss.
 */
export function listenOnSinglePool(pool: pg.Pool): SingleSessionListener {
  const subscribers = new Map<string, Set<NotificationHandlers>>();
  const each = (channel: string, call: (handlers: NotificationHandlers) => void) => subscribers.get(channel)?.forEach(call);
  const everyone = (call: (handlers: NotificationHandlers) => void) => subscribers.forEach((_, channel) => each(channel, call));
  let lost = false;

  const onConnect = async (client: pg.ClientBase) => {
    let failed: Error | undefined;
    client.on('error', (error: Error) => (failed = error));
    client.on('notification', (message) => each(message.channel, (handlers) => handlers.onNotification(message.payload ?? '')));
    client.on('end', () => {
      if (!failed && !hasUnansweredStatement(client)) return;
      lost = true;
      everyone((handlers) => handlers.onLost(failed));
    });
    for (const channel of subscribers.keys()) await client.query(`LISTEN ${quoted(channel)}`);
    if (!lost) return;
    lost = false;
    everyone((handlers) => handlers.onListening());
  };

  const listen: Listen = (channel, handlers) => {
    const forChannel = subscribers.get(channel) ?? new Set();
    subscribers.set(channel, forChannel);
    forChannel.add(handlers);
    void pool.query(`LISTEN ${quoted(channel)}`).then(
      () => forChannel.has(handlers) && handlers.onListening(),
      (error: Error) => forChannel.has(handlers) && handlers.onLost(error),
    );
    return {
      backendPid: undefined,
      catchUp: async () => {}, // delivered with the committing statement's answer
      async close() {
        forChannel.delete(handlers);
        if (forChannel.size > 0) return;
        subscribers.delete(channel);
        if (!pool.ended) await pool.query(`UNLISTEN ${quoted(channel)}`).catch(() => {});
      },
    };
  };
  return { listen, onConnect };
}
