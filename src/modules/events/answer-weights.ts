// What an append's answer is expected to weigh, learned from the answers before it (append-batcher.ts).
//
// An append answers its session's merged state: the session's own state, its user's and its
// space's. Each part is remembered where it lives, and only when it is large: a space whose state
// is a megabyte makes the first append of each of its sessions heavy too, not only the ones that
// already answered once. Bounded: each map forgets the part answered longest ago past `capacity`
// (it then counts as light until answered again). Pure but for its maps.
import type { SessionKey } from '../../db/keys.js';

/** The three states an answer carries, as JSON text. */
export interface AnsweredStates {
  state: string;
  user_state: string;
  app_state: string;
}

/** The states an answer carries, in characters of JSON text. */
export const answeredBytes = (answer: AnsweredStates): number => answer.state.length + answer.user_state.length + answer.app_state.length;

export interface AnswerWeights {
  /** Records the parts of `answer` that weigh at least the threshold (and forgets the ones that no longer do). */
  note(key: SessionKey, answer: AnsweredStates): void;
  /** The answer bytes expected of an append to `key`: its large parts known, 0 for the rest. */
  expected(key: SessionKey): number;
  /** Whether any large part is known (when none is, nothing need be asked). */
  readonly any: boolean;
}

export function createAnswerWeights({ partBytes, capacity }: { partBytes: number; capacity: number }): AnswerWeights {
  const spaces = new Map<string, number>();
  const users = new Map<string, number>();
  const sessions = new Map<string, number>();
  const remember = (parts: Map<string, number>, id: string, bytes: number) => {
    if (bytes < partBytes) {
      if (parts.size > 0) parts.delete(id);
      return;
    }
    parts.delete(id);
    parts.set(id, bytes);
    if (parts.size > capacity) parts.delete(parts.keys().next().value!);
  };
  const spaceOf = (key: SessionKey) => `${key.accountId}\u0000${key.spaceId}`;
  const userOf = (key: SessionKey) => `${spaceOf(key)}\u0000${key.userId}`;
  const sessionOf = (key: SessionKey) => `${userOf(key)}\u0000${key.sessionId}`;
  return {
    note(key, answer) {
      const app = answer.app_state.length;
      const user = answer.user_state.length;
      const own = answer.state.length;
      // The usual answer, with nothing large known: nothing to record or forget.
      if (app < partBytes && user < partBytes && own < partBytes && spaces.size === 0 && users.size === 0 && sessions.size === 0) return;
      remember(spaces, spaceOf(key), app);
      remember(users, userOf(key), user);
      remember(sessions, sessionOf(key), own);
    },
    expected(key) {
      return (spaces.get(spaceOf(key)) ?? 0) + (users.get(userOf(key)) ?? 0) + (sessions.get(sessionOf(key)) ?? 0);
    },
    get any() {
      return spaces.size > 0 || users.size > 0 || sessions.size > 0;
    },
  };
}
