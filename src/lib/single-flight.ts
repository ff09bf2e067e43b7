// One run at a time per key: a caller that arrives while the work for its key is running waits for
// that run instead of starting the same work again. Pure (no I/O).

export type SingleFlight = <T>(key: string, work: () => Promise<T>) => Promise<T>;

export function createSingleFlight(): SingleFlight {
  const running = new Map<string, Promise<unknown>>();
  return <T>(key: string, work: () => Promise<T>): Promise<T> => {
    const current = running.get(key);
    if (current) return current as Promise<T>;
    const run = work().finally(() => running.delete(key));
    running.set(key, run);
    return run;
  };
}
