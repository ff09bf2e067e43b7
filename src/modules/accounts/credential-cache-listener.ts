// Keeps one instance's credential cache right: every change the database announces on
// `credentials_changed` (migrations/0005) drops the entries it names, and the cache serves only
// while the announcements are known to arrive. Lost listener → cache dropped whole and off (every
// request reads the database, as without a cache); listening again → cleared and on.
import type { Listen, NotificationSubscription } from '../../db/notifications.js';
import { CredentialCache, parseCredentialChange } from './credential-cache.js';

export const CREDENTIALS_CHANNEL = 'credentials_changed';
export const CREDENTIAL_CACHE_TTL_MS = 60_000;

export interface CacheLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

export interface ListeningCredentialCache {
  readonly cache: CredentialCache;
  /** Resolves once every credential change committed before the call has reached this cache. */
  catchUp(): Promise<void>;
  /** The listening connection's backend pid on PostgreSQL, while listening. */
  readonly listenerPid: number | undefined;
  close(): Promise<void>;
}

export function startCredentialCache(
  listen: Listen,
  { maxEntries, ttlMs = CREDENTIAL_CACHE_TTL_MS, logger }: { maxEntries: number; ttlMs?: number; logger?: CacheLogger | undefined },
): ListeningCredentialCache {
  const cache = new CredentialCache({ maxEntries, ttlMs });
  const subscription: NotificationSubscription = listen(CREDENTIALS_CHANNEL, {
    onListening() {
      if (!cache.enabled) logger?.info({ channel: CREDENTIALS_CHANNEL }, 'credential cache on: listening for credential changes');
      cache.enable();
    },
    onNotification: (payload) => cache.invalidate(parseCredentialChange(payload)),
    onLost(error) {
      if (cache.enabled) logger?.warn({ channel: CREDENTIALS_CHANNEL, err: error }, 'credential cache off: the listening connection was lost');
      cache.disable();
    },
  });
  return {
    cache,
    catchUp: () => subscription.catchUp(),
    get listenerPid() {
      return subscription.backendPid;
    },
    async close() {
      cache.disable();
      await subscription.close();
    },
  };
}
