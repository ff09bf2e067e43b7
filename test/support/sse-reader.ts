// A server-sent event stream read with fetch, frame by frame, as a client that sends its own
// Authorization header would (the browser's EventSource cannot).
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
  comment?: string;
}

export interface SseStream {
  status: number;
  headers: Headers;
  /** The error body, when the answer is not a stream. */
  errorBody?: { error: { code: string; message: string } };
  /**
   * Resolves with the next frame, or undefined once the server ended the stream cleanly (or after
   * close()); rejects when the connection failed (a reset is not an end).
   */
  next(): Promise<SseFrame | undefined>;
  /** The next `count` event frames (comments skipped); fails if the stream ends first. */
  events(count: number): Promise<Array<{ seq: number; body: Record<string, unknown> }>>;
  /** Reads until the server ends the stream; answers the frames read on the way; rejects on a reset. */
  untilEnd(): Promise<SseFrame[]>;
  close(): void;
}

export async function openSse(url: string, token: string | undefined, headers: Record<string, string> = {}): Promise<SseStream> {
  const controller = new AbortController();
  const response = await fetch(url, { headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers }, signal: controller.signal });
  if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
    return {
      status: response.status,
      headers: response.headers,
      errorBody: (await response.json()) as SseStream['errorBody'],
      next: async () => undefined,
      events: async () => [],
      untilEnd: async () => [],
      close: () => controller.abort(),
    };
  }
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let done = false;
  const next = async (): Promise<SseFrame | undefined> => {
    for (;;) {
      const end = buffer.indexOf('\n\n');
      if (end >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const frame: SseFrame = {};
        for (const line of block.split('\n')) {
          if (line.startsWith(':')) frame.comment = line.slice(1).trim();
          const colon = line.indexOf(':');
          const field = line.slice(0, colon);
          const value = line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id' || field === 'event') frame[field] = value;
          if (field === 'data') frame.data = frame.data === undefined ? value : `${frame.data}\n${value}`;
        }
        return frame;
      }
      if (done) return undefined;
      let chunk: ReadableStreamReadResult<string>;
      try {
        chunk = await reader.read();
      } catch (error) {
        // Our own close() aborts the read: that is an end. Anything else (a reset, a truncated
        // chunked body) is a failure the caller must see.
        if (controller.signal.aborted) return undefined;
        throw error;
      }
      if (chunk.done) done = true;
      else buffer += chunk.value;
    }
  };
  return {
    status: response.status,
    headers: response.headers,
    next,
    async events(count) {
      const found: Array<{ seq: number; body: Record<string, unknown> }> = [];
      while (found.length < count) {
        const frame = await next();
        if (!frame) throw new Error(`the stream ended after ${found.length} of ${count} events`);
        if (frame.event === 'event') found.push({ seq: Number(frame.id), body: JSON.parse(frame.data!) as Record<string, unknown> });
      }
      return found;
    },
    async untilEnd() {
      const frames: SseFrame[] = [];
      for (let frame = await next(); frame; frame = await next()) frames.push(frame);
      return frames;
    },
    close: () => controller.abort(),
  };
}
