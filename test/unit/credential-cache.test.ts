import { describe, expect, it } from 'vitest';
import { type CachedCredential, CredentialCache, parseCredentialChange } from '../../src/modules/accounts/credential-cache.js';

const credential = (secretId: string, accountId = 'acc-1', principalId = 'root'): CachedCredential => ({
  secret_id: secretId,
  account_id: accountId,
  principal_id: principalId,
  secret_hash: Buffer.alloc(32),
  secret_encrypted: null,
  status: 'enabled',
  last_used_time: null,
  kind: principalId === 'root' ? 'root' : 'sub',
  statements: null,
});

function enabledCache(options: { maxEntries?: number; ttlMs?: number } = {}) {
  const clock = { now: 1_000 };
  const cache = new CredentialCache({ maxEntries: options.maxEntries ?? 10, ttlMs: options.ttlMs ?? 60_000, now: () => clock.now });
  cache.enable();
  const put = (...credentials: CachedCredential[]) => credentials.forEach((c) => cache.set(c, cache.beginFill()));
  return { cache, clock, put };
}

describe('CredentialCache', () => {
  it('serves nothing and stores nothing until enabled', () => {
    const cache = new CredentialCache({ maxEntries: 10, ttlMs: 60_000 });
    cache.set(credential('a'), cache.beginFill());
    expect(cache.size).toBe(0);
    expect(cache.get('a')).toBeUndefined();
    cache.enable();
    cache.set(credential('a'), cache.beginFill());
    expect(cache.get('a')?.secret_id).toBe('a');
  });

  it('drops everything when disabled, and starts empty when enabled again', () => {
    const { cache, put } = enabledCache();
    put(credential('a'));
    cache.disable();
    expect(cache.size).toBe(0);
    expect(cache.get('a')).toBeUndefined();
    put(credential('a'));
    expect(cache.size).toBe(0);
    cache.enable();
    expect(cache.get('a')).toBeUndefined();
  });

  it('keeps at most maxEntries, evicting the least recently used', () => {
    const { cache, put } = enabledCache({ maxEntries: 2 });
    put(credential('a'), credential('b'));
    expect(cache.get('a')).toBeDefined(); // a is now more recent than b
    put(credential('c'));
    expect(cache.size).toBe(2);
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBeDefined();
    expect(cache.get('c')).toBeDefined();
  });

  it('stores nothing with maxEntries 0', () => {
    const { cache, put } = enabledCache({ maxEntries: 0 });
    put(credential('a'));
    expect(cache.size).toBe(0);
  });

  it('expires an entry after its TTL', () => {
    const { cache, clock, put } = enabledCache({ ttlMs: 1_000 });
    put(credential('a'));
    clock.now += 999;
    expect(cache.get('a')).toBeDefined();
    clock.now += 1;
    expect(cache.get('a')).toBeUndefined();
    expect(cache.size).toBe(0);
  });

  it('ignores a fill that an invalidation overtook (it may have read the old row)', () => {
    const { cache } = enabledCache();
    const ticket = cache.beginFill();
    cache.invalidate({ scope: 'credential', secretId: 'unrelated' });
    cache.set(credential('a'), ticket);
    expect(cache.get('a')).toBeUndefined();
    for (const interruption of [() => cache.disable(), () => cache.enable()]) {
      cache.enable();
      const stale = cache.beginFill();
      interruption();
      cache.enable();
      cache.set(credential('a'), stale);
      expect(cache.get('a')).toBeUndefined();
    }
  });

  it('drops what each kind of change names, and only that', () => {
    const { cache, put } = enabledCache();
    const all = () => [credential('a1', 'acc-1'), credential('s1', 'acc-1', 'sub-1'), credential('s2', 'acc-1', 'sub-2'), credential('b1', 'acc-2')];
    const kept = () => ['a1', 's1', 's2', 'b1'].filter((id) => cache.get(id));

    put(...all());
    cache.invalidate({ scope: 'credential', secretId: 's1' });
    expect(kept()).toEqual(['a1', 's2', 'b1']);

    put(...all());
    cache.invalidate({ scope: 'principal', accountId: 'acc-1', principalId: 'sub-2' });
    expect(kept()).toEqual(['a1', 's1', 'b1']);

    put(...all());
    cache.invalidate({ scope: 'account', accountId: 'acc-1' });
    expect(kept()).toEqual(['b1']);

    put(...all());
    cache.invalidate({ scope: 'all' });
    expect(kept()).toEqual([]);
  });

  it('records a use on the cached entry', () => {
    const { cache, put } = enabledCache();
    put(credential('a'));
    const at = new Date('2030-01-01T00:00:00.000Z');
    cache.noteUse('a', at);
    expect(cache.get('a')?.last_used_time).toEqual(at);
    cache.noteUse('absent', at);
    expect(cache.get('absent')).toBeUndefined();
  });
});

describe('parseCredentialChange', () => {
  it('reads the payloads the triggers send', () => {
    expect(parseCredentialChange('{"secretId": "AKIDx"}')).toEqual({ scope: 'credential', secretId: 'AKIDx' });
    expect(parseCredentialChange('{"accountId": "a", "principalId": "p"}')).toEqual({ scope: 'principal', accountId: 'a', principalId: 'p' });
    expect(parseCredentialChange('{"accountId": "a"}')).toEqual({ scope: 'account', accountId: 'a' });
    expect(parseCredentialChange('{}')).toEqual({ scope: 'all' });
  });

  it('drops everything on anything it does not understand', () => {
    for (const payload of ['', 'not json', 'null', '42', '"AKIDx"', '{"secretId": 1}', '{"accountId": "a", "principalId": null}', '{"principalId": "p"}']) {
      expect(parseCredentialChange(payload), payload).toEqual({ scope: 'all' });
    }
  });
});
