// pg warns (and pg 9 will refuse) when a client is handed a query while it is still executing one:
// two callers sharing one connection, whose statements then interleave with each other's
// transactions. The service must never do it (issue 20: PGlite's LISTEN was queued that way on
// every new connection). Loaded before every integration and browser test file: the warning fails
// the test it appears in (or, when it comes after the last test, the file).
import { afterAll, afterEach, expect } from 'vitest';

const CONCURRENT_CLIENT_USE = /client\.query\(\) when the client is already executing a query/;

// A worker runs many files one after the other (vitest.config.ts: isolate false) and this module
// again for each: one listener per worker process, and one list of what it saw.
const SEEN = Symbol.for('ass.test.concurrentClientUse');
const processWithList = process as typeof process & { [SEEN]?: string[] };
const seen = (processWithList[SEEN] ??= listenForConcurrentClientUse());

function listenForConcurrentClientUse(): string[] {
  const list: string[] = [];
  process.on('warning', (warning) => {
    if (CONCURRENT_CLIENT_USE.test(warning.message)) list.push(warning.stack ?? warning.message);
  });
  return list;
}

const expectNone = () => expect(seen.splice(0), 'a pg client was given a query while it was executing another').toEqual([]);
afterEach(expectNone);
afterAll(expectNone);
