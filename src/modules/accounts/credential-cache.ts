// The verified-credential cache: what `authenticate` read from the database for a secretId, kept so
// that the next request with that credential needs no round trip. Pure (no I/O): it is kept right
// by the caller, which drops entries on every change announced by the database (see
// credential-cache-listener.ts) and disables the cache whenever announcements may be missed.
//
// What it never holds: a token or a plain secret key. An entry holds the stored hash, and every hit
// is still checked against the presented key. Unknown secretIds are not cached, so guessing ids
// cannot fill it.
import type { CredentialWithPolicy } from './accounts.repository.js';

export type CachedCredential = CredentialWithPolicy;

/** What changed, as announced on the `credentials_changed` channel (migrations/0005). */
export type CredentialChange =
  | { scope: 'credential'; secretId: string }
  | { scope: 'principal'; accountId: string; principalId: string }
  | { scope: 'account'; accountId: string }
  | { scope: 'all' };

export interface CredentialCacheOptions {
  /** Most entries kept; the least recently used one goes first. */
  maxEntries: number;
  /** A backstop only (changes are announced): an entry older than this is read again. */
  ttlMs: number;
  now?: () => number;
}

/** A fill started before an invalidation must not store what it read: see beginFill(). */
export type FillTicket = number & { readonly fillTicket: unique symbol };

interface Entry {
  credential: CachedCredential;
  expiresAt: number;
}

export class CredentialCache {
  readonly #entries = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  #enabled = false;
  // Bumped by every invalidation, clear, enable and disable.
  #generation = 0;

  constructor({ maxEntries, ttlMs, now = Date.now }: CredentialCacheOptions) {
    this.#maxEntries = maxEntries;
    this.#ttlMs = ttlMs;
    this.#now = now;
  }

  /** Off until enabled: a cache is only as fresh as the announcements it receives. */
  get enabled(): boolean {
    return this.#enabled;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** Starts (or restarts) serving, from empty: announcements may have been missed while off. */
  enable(): void {
    this.#entries.clear();
    this.#generation++;
    this.#enabled = true;
  }

  /** Stops serving and forgets everything; get() misses and set() stores nothing until enable(). */
  disable(): void {
    this.#entries.clear();
    this.#generation++;
    this.#enabled = false;
  }

  get(secretId: string): CachedCredential | undefined {
    if (!this.#enabled) return undefined;
    const entry = this.#entries.get(secretId);
    if (!entry) return undefined;
    this.#entries.delete(secretId);
    if (entry.expiresAt <= this.#now()) return undefined;
    this.#entries.set(secretId, entry); // most recently used last
    return entry.credential;
  }

  /**
   * Call before reading the database for a fill. An invalidation that arrives between the read
   * and set() may describe a change the read did not see yet; the ticket makes set() ignore such
   * a fill instead of caching the old row.
   */
  beginFill(): FillTicket {
    return this.#generation as FillTicket;
  }

  set(credential: CachedCredential, ticket: FillTicket): void {
    if (!this.#enabled || ticket !== this.#generation || this.#maxEntries <= 0) return;
    this.#entries.delete(credential.secret_id);
    this.#entries.set(credential.secret_id, { credential, expiresAt: this.#now() + this.#ttlMs });
    while (this.#entries.size > this.#maxEntries) this.#entries.delete(this.#entries.keys().next().value as string);
  }

  /** Keeps a cached entry's last_used_time in step with the write that recorded the use. */
  noteUse(secretId: string, at: Date): void {
    const entry = this.#entries.get(secretId);
    if (entry) entry.credential = { ...entry.credential, last_used_time: at };
  }

  invalidate(change: CredentialChange): void {
    this.#generation++;
    switch (change.scope) {
      case 'credential':
        this.#entries.delete(change.secretId);
        return;
      case 'all':
        this.#entries.clear();
        return;
      default:
        // Rare (principal, policy or account changes): a scan of a bounded map is fine.
        for (const [secretId, { credential }] of this.#entries) {
          if (credential.account_id !== change.accountId) continue;
          if (change.scope === 'principal' && credential.principal_id !== change.principalId) continue;
          this.#entries.delete(secretId);
        }
    }
  }
}

/**
 * Reads a `credentials_changed` payload. Anything unexpected (a newer instance's format, say)
 * drops everything: a needless miss is cheap, a stale credential is not.
 */
export function parseCredentialChange(payload: string): CredentialChange {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return { scope: 'all' };
  }
  if (typeof value !== 'object' || value === null) return { scope: 'all' };
  const { secretId, accountId, principalId } = value as Record<string, unknown>;
  if (typeof secretId === 'string') return { scope: 'credential', secretId };
  if (typeof accountId === 'string' && typeof principalId === 'string') return { scope: 'principal', accountId, principalId };
  if (typeof accountId === 'string' && principalId === undefined) return { scope: 'account', accountId };
  return { scope: 'all' };
}
