// The shapes of the instance's event streams (modules/events/event-stream.service.ts), here so that
// the app's dependencies (http/zod-app.ts) can name them without importing a module.

/** The session a stream follows (db/keys.ts SessionKey, restated: src/lib imports no database code). */
export interface StreamSessionKey {
  accountId: string;
  spaceId: string;
  userId: string;
  sessionId: string;
}

/**
 * Where the stream's text goes. write resolves once the chunk is buffered below the high-water
 * mark; a Buffer is written as it is, so one frame's bytes can go to many streams.
 */
export interface StreamSink {
  write(chunk: string | Buffer): Promise<void>;
  end(): void;
}

export interface EventStream {
  /** Ends the stream (shutdown, or the client went away); safe to call more than once. */
  close(): void;
  /** Settles when the stream has ended. */
  readonly ended: Promise<void>;
}

/**
 * Throws the AppError a new request with this Authorization header would get for reading the
 * events of the space (AuthFailure, UnauthorizedOperation, ResourceNotFound.SessionSpace).
 */
export type Reauthorize = (authorization: string | undefined, spaceId: string) => Promise<void>;

export interface EventStreams {
  /**
   * Takes a slot (429 RequestLimitExceeded past a cap), checks the session (404 before anything
   * is streamed), then streams until close(), the session is gone, the principal lost the right to
   * read it, or the lifetime is over (then a final `event: end` frame says why).
   */
  open(key: StreamSessionKey, afterSeq: number, sink: StreamSink, authorization: string | undefined): Promise<EventStream>;
  /** Ends every open stream (shutdown: no end frame, the clients reconnect elsewhere). */
  closeAll(): void;
}

