// Work split into turns of the event loop: between two turns Node reads the sockets and runs the
// timers that became due, so the requests that arrived meanwhile, of every account, are served
// between the pieces of a long piece of work instead of after all of it.

/** Runs the first task now and each of the others in a later turn of its own (setImmediate), in order. */
export function runInTurns(tasks: (() => void)[], nextTurn: (callback: () => void) => void = setImmediate): void {
  let next = 0;
  const runNext = () => {
    const task = tasks[next++];
    if (next < tasks.length) nextTurn(runNext);
    task?.();
  };
  runNext();
}
