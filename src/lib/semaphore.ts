// A counting semaphore: at most `slots` tasks run at once, the others wait in arrival order. Pure
// (no I/O); the session lists use one per instance so that they cannot take every pool connection.

export interface Semaphore {
  /** Runs `task` once a slot is free; the slot is given back when it settles. */
  run<T>(task: () => Promise<T>): Promise<T>;
  /** Tasks running now and tasks waiting for a slot (for tests and metrics). */
  readonly running: number;
  readonly waiting: number;
}

export function createSemaphore(slots: number): Semaphore {
  if (!Number.isInteger(slots) || slots < 1) throw new Error(`a semaphore needs at least one slot, not ${slots}`);
  let running = 0;
  const queue: (() => void)[] = [];
  const release = () => {
    const next = queue.shift();
    if (next) next(); // the slot passes straight to the next task: running stays the same
    else running--;
  };
  return {
    async run<T>(task: () => Promise<T>): Promise<T> {
      if (running < slots) running++;
      else await new Promise<void>((resolve) => queue.push(resolve));
      try {
        return await task();
      } finally {
        release();
      }
    },
    get running() {
      return running;
    },
    get waiting() {
      return queue.length;
    },
  };
}
