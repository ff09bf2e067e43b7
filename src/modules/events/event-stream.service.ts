// A session's events as a server-sent event stream (docs/design.md §4.10): first the stored events
// after the caller's seq, then each new one as it is appended, in seq order, each exactly once.
//
// Round trips: opening costs the session check plus one page query per 200 stored events; after
// that, one query each time the feed (event-feed.ts) says the session has new events, and two per
// heartbeat (is the session still there; anything the feed missed). Between them the stream holds
// no database connection: a thousand open streams need no more of the pool than the requests do.
import type { Database } from '../../db/connect.js';
import type { SessionKey } from '../../db/keys.js';
import { sessionNotFound } from '../sessions/session-not-found.js';
import { toEventView } from './event.model.js';
import type { EventFeed } from '../../db/event-feed.js';
import { findLiveSessionId, listEvents } from './events.repository.js';

/** Where the stream's text goes. write resolves once the text is buffered below the high-water mark. */
export interface StreamSink {
  write(text: string): Promise<void>;
  end(): void;
}

export interface EventStream {
  /** Ends the stream (shutdown, or the client went away); safe to call more than once. */
  close(): void;
  /** Settles when the stream has ended. */
  readonly ended: Promise<void>;
}

export interface EventStreamOptions {
  heartbeatMs: number;
  /** Events per catch-up query. */
  pageSize?: number;
}

/** The SSE frame of one event: its seq is the id a reconnecting client sends back as Last-Event-ID. */
export function eventFrame(seq: number, json: string): string {
  return `id: ${seq}\nevent: event\ndata: ${json}\n\n`;
}

/**
 * Checks the session (404 before anything is streamed), then streams. The returned stream runs
 * until close() or until the session is gone (then a final `event: end` frame says why).
 */
export async function openEventStream(
  db: Database,
  feed: EventFeed,
  key: SessionKey,
  afterSeq: number,
  sink: StreamSink,
  { heartbeatMs, pageSize = 200 }: EventStreamOptions,
): Promise<EventStream> {
  if (!(await findLiveSessionId(db, key))) throw await sessionNotFound(db, key);

  let lastSeq = afterSeq;
  let closed = false;
  let pumping: Promise<void> | undefined;
  let again = false;
  let resolveEnded!: () => void;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));

  const close = () => {
    if (closed) return;
    closed = true;
    unsubscribe();
    clearInterval(heartbeat);
    sink.end();
    resolveEnded();
  };

  // Reads and writes everything after lastSeq, page by page, waiting for the client to take each
  // frame: a slow reader slows the reads instead of filling the server's memory.
  const drain = async () => {
    for (;;) {
      const rows = await listEvents(db, key, {}, { order: 'asc', cursorSeq: lastSeq, limit: pageSize });
      for (const row of rows) {
        if (closed) return;
        await sink.write(eventFrame(row.seq, JSON.stringify(toEventView(row))));
        lastSeq = row.seq;
      }
      if (rows.length < pageSize) return;
    }
  };
  // One drain at a time; a notification during a drain asks for one more round after it.
  const pump = () => {
    if (closed) return;
    if (pumping) {
      again = true;
      return;
    }
    pumping = (async () => {
      do {
        again = false;
        await drain();
      } while (again && !closed);
    })()
      .catch(() => close()) // the database is unreachable: the client reconnects with Last-Event-ID
      .finally(() => (pumping = undefined));
  };

  const unsubscribe = feed.subscribe(key, (seq) => {
    if (seq === undefined || seq > lastSeq) pump();
  });
  const heartbeat = setInterval(() => {
    void (async () => {
      await sink.write(': heartbeat\n\n');
      if (closed) return;
      if (!(await findLiveSessionId(db, key))) {
        await sink.write('event: end\ndata: {"reason":"ResourceNotFound.Session"}\n\n');
        close();
        return;
      }
      pump();
    })().catch(() => close());
  }, heartbeatMs);
  heartbeat.unref();

  // The browser's EventSource reconnects after `retry` milliseconds on its own.
  await sink.write('retry: 1000\n\n');
  pump();
  return { close, ended };
}
