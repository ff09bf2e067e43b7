// One instance's feed of appends, for its open event streams: a single poller reads the event
// counts of the sessions that have open streams, and wakes a session's streams when its count
// moved. A stream holds no database connection while it waits; it reads the new events with one
// short query when told there are some.
//
// Why a poller and not a NOTIFY from every append: the append is the hot path (issue 9), and a
// notification costs every append a trigger and, at commit, PostgreSQL's notification queue lock,
// which serializes the commits of all appends whether or not anyone streams. The poller costs
// nothing while no stream is open, and one indexed query per interval (the sessions' primary key,
// a chunk of sessions at a time) while streams are, however many appends there are. An append
// made through this instance wakes its streams at once (`appended`); one made through another
// instance is seen within one interval.
import { sql } from 'kysely';
import type { Database } from './connect.js';
import type { SessionKey } from './keys.js';

/** Called with the newest seq known to be stored, or undefined for "look: something may be new". */
export type AppendedListener = (seq: number | undefined) => void;

export interface EventFeed {
  subscribe(key: SessionKey, listener: AppendedListener): () => void;
  /** This instance stored events up to `seq` in the session: its streams look at once. */
  appended(key: SessionKey, seq: number): void;
  /** Open subscriptions (metrics and tests). */
  readonly subscriberCount: number;
  close(): Promise<void>;
}

export interface EventFeedOptions {
  /** Pause between two polls, counted from the end of the previous one. */
  intervalMs: number;
  /** Sessions per poll query. */
  chunkSize?: number;
}

interface Watched {
  key: SessionKey;
  listeners: Set<AppendedListener>;
  /** The event count the listeners were last told of; undefined until the first poll. */
  seenCount: number | undefined;
}

const sessionTag = (key: SessionKey) => JSON.stringify([key.accountId, key.spaceId, key.userId, key.sessionId]);

/** A feed polling `db`, or, without one, a feed that never polls (streams then rely on their heartbeat). */
export function startEventFeed(db: Database | undefined, { intervalMs, chunkSize = 500 }: EventFeedOptions): EventFeed {
  const watched = new Map<string, Watched>();
  let count = 0;
  let closed = false;
  let timer: NodeJS.Timeout | undefined;
  let polling: Promise<void> | undefined;

  const tell = (entry: Watched, seq: number | undefined) => entry.listeners.forEach((listener) => listener(seq));

  const pollChunk = async (entries: Watched[]) => {
    const keys = entries.map(({ key }) => sql`(${key.accountId}, ${key.spaceId}, ${key.userId}, ${key.sessionId})`);
    const rows = await db!
      .selectFrom('sessions')
      .select(['account_id', 'space_id', 'user_id', 'session_id', 'event_count'])
      .where(sql<boolean>`(account_id, space_id, user_id, session_id) IN (${sql.join(keys)})`)
      .execute();
    const counts = new Map(rows.map((row) => [sessionTag({ accountId: row.account_id, spaceId: row.space_id, userId: row.user_id, sessionId: row.session_id }), Number(row.event_count)]));
    for (const entry of entries) {
      const current = counts.get(sessionTag(entry.key));
      // Gone (deleted or swept): the streams look, find nothing and end on their next heartbeat.
      if (current === undefined) tell(entry, undefined);
      else if (current !== entry.seenCount) {
        entry.seenCount = current;
        tell(entry, current);
      }
    }
  };

  const poll = async () => {
    const entries = [...watched.values()];
    for (let start = 0; start < entries.length && !closed; start += chunkSize) await pollChunk(entries.slice(start, start + chunkSize));
  };

  const schedule = () => {
    if (closed || !db || watched.size === 0 || timer || polling) return;
    timer = setTimeout(() => {
      timer = undefined;
      polling = poll()
        // The database is unreachable: streams are only late; the next poll tries again.
        .catch(() => {})
        .finally(() => {
          polling = undefined;
          schedule();
        });
    }, intervalMs);
    timer.unref();
  };

  return {
    subscribe(key, listener) {
      const tag = sessionTag(key);
      const entry = watched.get(tag) ?? { key, listeners: new Set(), seenCount: undefined };
      watched.set(tag, entry);
      entry.listeners.add(listener);
      count++;
      schedule();
      return () => {
        if (!entry.listeners.delete(listener)) return;
        count--;
        if (entry.listeners.size === 0) watched.delete(tag);
      };
    },
    appended(key, seq) {
      // Called on every append: with no stream open (the usual case) it costs one size check.
      if (watched.size === 0) return;
      const entry = watched.get(sessionTag(key));
      if (entry) tell(entry, seq);
    },
    get subscriberCount() {
      return count;
    },
    async close() {
      closed = true;
      clearTimeout(timer);
      timer = undefined;
      watched.clear();
      count = 0;
      await polling;
    },
  };
}
