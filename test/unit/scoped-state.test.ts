import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  type ScopedStates,
  applyScopedDelta,
  mergedStateText,
  mergedStateView,
  scopeOfKey,
  scopesTouched,
  splitByScope,
  withoutTempKeys,
} from '../../src/modules/state/scoped-state.js';

describe('scopeOfKey', () => {
  it('reads the scope from the prefix of a top-level key', () => {
    expect(scopeOfKey('user:name')).toBe('user');
    expect(scopeOfKey('app:flag')).toBe('app');
    expect(scopeOfKey('temp:scratch')).toBe('temp');
    expect(scopeOfKey('plain')).toBe('session');
    // Only an exact lowercase prefix counts.
    expect(scopeOfKey('User:x')).toBe('session');
    expect(scopeOfKey('userx')).toBe('session');
    expect(scopeOfKey('x:user:y')).toBe('session');
  });
});

describe('splitByScope', () => {
  it('splits by top-level key, keeps the prefixes, and drops temp: keys', () => {
    const parts = splitByScope({ a: 1, 'user:lang': 'fr', 'app:motd': 'hi', 'temp:scratch': { big: true }, nested: { 'user:no': 1 } });
    expect(parts).toEqual({
      session: { a: 1, nested: { 'user:no': 1 } },
      user: { 'user:lang': 'fr' },
      app: { 'app:motd': 'hi' },
    });
  });

  it('withoutTempKeys keeps every other key, including null values', () => {
    expect(withoutTempKeys({ 'temp:a': 1, 'user:b': null, c: 2 })).toEqual({ 'user:b': null, c: 2 });
  });

  it('scopesTouched ignores temp: keys', () => {
    expect([...scopesTouched({ 'temp:a': 1 })]).toEqual([]);
    expect([...scopesTouched({ 'user:a': 1, b: 2, 'app:c': 3 })].sort()).toEqual(['app', 'session', 'user']);
  });
});

describe('applyScopedDelta', () => {
  const states: ScopedStates = {
    session: { s: 1, obj: { a: 1 } },
    user: { 'user:profile': { name: 'Ada', lang: 'en' }, 'user:gone': true },
    app: { 'app:version': 1 },
  };

  it('merge-patch applies per scope: nested objects merge, null deletes the scoped key', () => {
    const next = applyScopedDelta(states, { 'user:profile': { lang: 'fr' }, 'user:gone': null, obj: { b: 2 }, 'app:version': 2, 'temp:x': 1 });
    expect(next).toEqual({
      session: { s: 1, obj: { a: 1, b: 2 } },
      user: { 'user:profile': { name: 'Ada', lang: 'fr' } },
      app: { 'app:version': 2 },
    });
  });

  it('replace mode applies per scope: top-level keys replaced whole, null stored', () => {
    const next = applyScopedDelta(states, { 'user:profile': { lang: 'fr' }, 'user:gone': null, 'app:new': null }, 'replace');
    expect(next.user).toEqual({ 'user:profile': { lang: 'fr' }, 'user:gone': null });
    expect(next.app).toEqual({ 'app:version': 1, 'app:new': null });
    expect(next.session).toBe(states.session);
  });

  it('leaves untouched scopes as the same objects and mutates nothing', () => {
    const before = structuredClone(states);
    const next = applyScopedDelta(states, { 'user:x': 1, 'temp:y': 2 });
    expect(next.session).toBe(states.session);
    expect(next.app).toBe(states.app);
    expect(next.user).not.toBe(states.user);
    expect(states).toEqual(before);
  });

  it('a temp:-only delta changes nothing', () => {
    const next = applyScopedDelta(states, { 'temp:only': 1 });
    expect(next).toEqual(states);
    for (const scope of ['session', 'user', 'app'] as const) expect(next[scope]).toBe(states[scope]);
  });
});

describe('mergedStateView', () => {
  it('is the union of the session keys, the user: keys and the app: keys', () => {
    expect(mergedStateView({ session: { a: 1 }, user: { 'user:b': 2 }, app: { 'app:c': 3 } })).toEqual({ a: 1, 'user:b': 2, 'app:c': 3 });
  });

  it('takes each key only from the scope it belongs to', () => {
    const view = mergedStateView({
      session: { a: 1, 'user:stale': 'from session', 'temp:t': 1 },
      user: { 'user:b': 2, 'app:wrong': 'x', plain: 'x' },
      app: { 'app:c': 3, 'user:wrong': 'x' },
    });
    expect(view).toEqual({ a: 1, 'user:b': 2, 'app:c': 3 });
  });
});

describe('mergedStateText', () => {
  it('passes a session state with no shared state and no key of another scope on as the very text', () => {
    const text = '{"a": 1, "nested": {"user": "not a prefix"}, "s": "app"}';
    expect(mergedStateText(text, '{}', '{}')).toBe(text);
  });

  it('merges as mergedStateView does when there is shared state or a key of another scope may be stored', () => {
    const cases: [string, string, string][] = [
      ['{"a": 1}', '{"user:b": 2}', '{}'],
      ['{"a": 1}', '{}', '{"app:c": 3, "user:wrong": 4}'],
      ['{"a": 1, "user:stale": 5, "temp:t": 6}', '{}', '{}'],
      ['{"a": {"app:nested": 1}}', '{}', '{}'],
    ];
    for (const [session, user, app] of cases) {
      const states = { session: JSON.parse(session), user: JSON.parse(user), app: JSON.parse(app) };
      expect(JSON.parse(mergedStateText(session, user, app))).toEqual(mergedStateView(states));
    }
  });

  it('joins the parts as text, unparsed, when each holds only keys of its own scope', () => {
    // 1.50 and 1e2 stay as written: nothing was parsed and written out again.
    expect(mergedStateText('{"a": 1.50, "s": "user:"}', '{"user:b": 2}', '{"app:c": {"x": 1e2, "user:y": 1}}')).toBe('{"a": 1.50, "s": "user:","user:b": 2,"app:c": {"x": 1e2, "user:y": 1}}');
  });

  it('is mergedStateView, keys in the same order, for any states, stray keys included', () => {
    const key = fc.oneof(fc.string({ maxLength: 4 }), fc.constantFrom('user:', 'app:', 'temp:').chain((prefix) => fc.string({ maxLength: 3 }).map((rest) => prefix + rest)));
    const state = fc.dictionary(key, fc.jsonValue({ maxDepth: 2 }), { maxKeys: 6 });
    // Mostly states as the service stores them (each scope's own keys), sometimes with stray keys.
    const scoped = (scope: 'session' | 'user' | 'app') => fc.oneof(state.map((s) => Object.fromEntries(Object.entries(s).filter(([k]) => scopeOfKey(k) === scope))), state);
    fc.assert(
      fc.property(scoped('session'), scoped('user'), scoped('app'), (session, user, app) => {
        const text = mergedStateText(JSON.stringify(session), JSON.stringify(user), JSON.stringify(app));
        // As JSON text says it (-0 is written 0).
        const view = JSON.parse(JSON.stringify(mergedStateView({ session, user, app } as ScopedStates))) as object;
        expect(JSON.parse(text)).toEqual(view);
        expect(Object.keys(JSON.parse(text))).toEqual(Object.keys(view));
      }),
      { numRuns: 500 },
    );
  });
});
