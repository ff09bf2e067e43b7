// Which waiting appends the next group-commit call takes when some of them are heavy (append-batcher.ts).
//
// An append's answer carries its session's merged state, its user's and its space's states
// included (SPEC §4.2): in a space with a state of a megabyte, every append answers a megabyte,
// which PostgreSQL writes out, sends and this process decodes and writes again. A batch of 32 such
// appends was 32 MB and half a second in one call; the appends of other accounts queued behind
// them, first-come first-served, waited for call after call (another account's append p50 went
// from 3 ms to about a second). So once heavy appends wait, a call takes
// - the accounts' appends in turns, one of each account in the order their oldest arrived, then
//   again (each account's own appends keep their order: one that does not fit ends its account's
//   turns in this call, so no later append of it goes ahead);
// - at most `maxBytes` of expected answer, whatever the count (the first append always goes).

export interface Weighed<T> {
  item: T;
  accountId: string;
  /** The answer bytes expected of it (what its session's last answer carried; 0 when light or unknown). */
  bytes: number;
  /**
   * False: it stays waiting and takes no turn (an append of the other kind than the call's,
   * append-batcher.ts). The kind is the session's, so a session's appends keep their order.
   */
  eligible?: boolean;
}

/** The next call's appends and what stays waiting, each in the order it was given. */
export function chooseBatch<T>(waiting: Weighed<T>[], maxBatch: number, maxBytes: number, onlyAccount?: string): { batch: T[]; rest: T[] } {
  const turns = new Map<string, Weighed<T>[]>();
  for (const entry of waiting) {
    if (entry.eligible === false || (onlyAccount !== undefined && entry.accountId !== onlyAccount)) continue;
    const queue = turns.get(entry.accountId);
    if (queue) queue.push(entry);
    else turns.set(entry.accountId, [entry]);
  }
  const taken = new Set<Weighed<T>>();
  let bytes = 0;
  const queues = [...turns.values()];
  const next = queues.map(() => 0);
  for (let more = true; more && taken.size < maxBatch; ) {
    more = false;
    for (let q = 0; q < queues.length && taken.size < maxBatch; q++) {
      const queue = queues[q]!;
      const entry = queue[next[q]!];
      if (!entry) continue;
      if (taken.size > 0 && bytes + entry.bytes > maxBytes) {
        next[q] = queue.length; // its turns end: a later append of this account must not go first
        continue;
      }
      taken.add(entry);
      bytes += entry.bytes;
      next[q]! += 1;
      if (next[q]! < queue.length) more = true;
    }
  }
  const batch: T[] = [];
  const rest: T[] = [];
  for (const entry of waiting) (taken.has(entry) ? batch : rest).push(entry.item);
  return { batch, rest };
}
