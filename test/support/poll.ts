// Waiting in a test for what happens in the background (a timer's run, a listener that reconnects,
// statistics a backend reports later): read again every intervalMs until it is there, or fail
// naming what was awaited and what was last seen.
import { sleep } from './service-process.js';

export interface PollOptions {
  timeoutMs?: number;
  intervalMs?: number;
}

/** Reads until `done(value)` and answers that value; throws after `timeoutMs` with `what` and the last value. */
export async function untilValue<T>(
  read: () => T | Promise<T>,
  done: (value: T) => boolean,
  what: string,
  { timeoutMs = 10_000, intervalMs = 20 }: PollOptions = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await sleep(intervalMs);
  }
}

/** Until `condition()` holds. */
export async function until(condition: () => boolean | Promise<boolean>, what: string, options?: PollOptions): Promise<void> {
  await untilValue(condition, (held) => held, what, options);
}
