// A task run again and again in the background (the expiry sweeper, the embedded database's vacuum):
// each run starts `intervalMs` after the previous one ended, so runs never overlap however long one
// takes; the timer never keeps the process alive; stop() cancels the next run and waits for one in
// flight, which may still need what the caller is about to close (the database).

/** The pino methods the background tasks use, so any pino logger (or a test double) fits. */
export interface TaskLogger {
  debug(fields: object, message: string): void;
  info(fields: object, message: string): void;
  error(fields: object, message: string): void;
}

export interface PeriodicTask {
  /** Cancels the next run and waits for a run in flight to finish. */
  stop(): Promise<void>;
}

/**
 * Runs `run` every `intervalMs`, counted from the end of the previous run. `run` must not throw; a
 * long run may ask `stopping()` between its steps and end early once stop() was called.
 */
export function startPeriodicTask(run: (stopping: () => boolean) => Promise<void>, intervalMs: number): PeriodicTask {
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let inFlight: Promise<void> | undefined;
  const stopping = () => stopped;

  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      inFlight = run(stopping).finally(() => {
        inFlight = undefined;
        schedule();
      });
    }, intervalMs);
    timer.unref();
  };
  schedule();

  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await inFlight;
    },
  };
}
