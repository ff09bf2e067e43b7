// The appends the multi-instance tests send to detect a lost update: each writes a key of its own
// into the session's state and, two turns in three, into the user's state, one in three into the
// space's, plus keys every writer overwrites (`last`, `user:last`, `app:last`). A lost update
// drops one of the own keys, which the tests then look for in the stored states.

/** The own keys the appends sent so far wrote: per session (`user/sessionId`), per user, for the space. */
export interface ExpectedKeys {
  session: Map<string, string[]>;
  user: Map<string, string[]>;
  app: string[];
}

export function expectedKeys(): ExpectedKeys {
  return { session: new Map(), user: new Map(), app: [] };
}

/**
 * The body of writer `writer`'s turn `turn` in the session (its eventId is derived from both, so
 * the same turn sent twice is a replay), recording the own keys it writes in `expected`.
 */
export function turnAppend(expected: ExpectedKeys, user: string, sessionId: string, writer: string, turn: number) {
  const tag = `${writer}${turn}`;
  const delta: Record<string, unknown> = { [`own-${tag}`]: turn, last: tag };
  push(expected.session, `${user}/${sessionId}`, `own-${tag}`);
  if (turn % 3 !== 0) {
    delta[`user:${sessionId}-${tag}`] = turn;
    delta['user:last'] = `${sessionId}-${tag}`;
    push(expected.user, user, `user:${sessionId}-${tag}`);
  }
  if (turn % 3 === 2) {
    delta[`app:${user}-${sessionId}-${tag}`] = turn;
    delta['app:last'] = `${user}-${sessionId}-${tag}`;
    expected.app.push(`app:${user}-${sessionId}-${tag}`);
  }
  const eventId = `ev-${sessionId}-${tag}`;
  return { eventId, author: 'agent', content: { parts: [{ text: tag }] }, actions: { stateDelta: delta } };
}

function push(map: Map<string, string[]>, key: string, value: string): void {
  map.set(key, [...(map.get(key) ?? []), value]);
}
