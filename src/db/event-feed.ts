// One instance's feed of appends, for its open event streams: a single LISTEN on `events_appended`
// (migrations/0006) fanned out in memory to the streams of the session each notification names.
// A stream holds no database connection while it waits; it reads the new events with one short
// query when told there are some.
//
// While the listener is lost, notifications may be missed: on listening again every stream is told
// to look (a stream also looks on each heartbeat, so even a feed that never listens is only late).
import type { Listen, NotificationSubscription } from './notifications.js';
import type { SessionKey } from './keys.js';

export const EVENTS_CHANNEL = 'events_appended';

/** Called with the newest seq known to be stored, or undefined for "look: something may be new". */
export type AppendedListener = (seq: number | undefined) => void;

export interface EventFeed {
  subscribe(key: SessionKey, listener: AppendedListener): () => void;
  /** Open subscriptions (metrics and tests). */
  readonly subscriberCount: number;
  close(): Promise<void>;
}

const sessionTag = (key: SessionKey) => JSON.stringify([key.accountId, key.spaceId, key.userId, key.sessionId]);

export function parseAppended(payload: string): { key: SessionKey; seq: number } | undefined {
  try {
    const value = JSON.parse(payload) as Record<string, unknown>;
    const { accountId, spaceId, userId, sessionId, seq } = value;
    if (typeof accountId !== 'string' || typeof spaceId !== 'string' || typeof userId !== 'string' || typeof sessionId !== 'string') return undefined;
    if (typeof seq !== 'number' || !Number.isSafeInteger(seq)) return undefined;
    return { key: { accountId, spaceId, userId, sessionId }, seq };
  } catch {
    return undefined;
  }
}

/** A feed over `listen`, or, without one, a feed that never notifies (streams then rely on their heartbeat). */
export function startEventFeed(listen: Listen | undefined): EventFeed {
  const bySession = new Map<string, Set<AppendedListener>>();
  let count = 0;
  const everyone = (seq: number | undefined) => bySession.forEach((listeners) => listeners.forEach((listener) => listener(seq)));
  const subscription: NotificationSubscription | undefined = listen?.(EVENTS_CHANNEL, {
    onListening: () => everyone(undefined),
    onNotification(payload) {
      const appended = parseAppended(payload);
      if (appended) bySession.get(sessionTag(appended.key))?.forEach((listener) => listener(appended.seq));
    },
    onLost: () => {},
  });
  return {
    subscribe(key, listener) {
      const tag = sessionTag(key);
      const listeners = bySession.get(tag) ?? new Set();
      bySession.set(tag, listeners);
      listeners.add(listener);
      count++;
      return () => {
        if (!listeners.delete(listener)) return;
        count--;
        if (listeners.size === 0) bySession.delete(tag);
      };
    },
    get subscriberCount() {
      return count;
    },
    async close() {
      bySession.clear();
      count = 0;
      await subscription?.close();
    },
  };
}
