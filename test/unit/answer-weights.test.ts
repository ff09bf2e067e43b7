import { describe, expect, it } from 'vitest';
import { createAnswerWeights } from '../../src/modules/events/answer-weights.js';

const key = (spaceId: string, userId: string, sessionId: string) => ({ accountId: 'acc', spaceId, userId, sessionId });
const states = (own: number, user: number, app: number) => ({ state: 'x'.repeat(own), user_state: 'x'.repeat(user), app_state: 'x'.repeat(app) });

describe('createAnswerWeights', () => {
  it('knows nothing until a large state was answered, and ignores the small ones', () => {
    const weights = createAnswerWeights({ partBytes: 100, capacity: 10 });
    weights.note(key('sp', 'u', 's'), states(99, 99, 99));
    expect(weights.any).toBe(false);
    expect(weights.expected(key('sp', 'u', 's'))).toBe(0);
  });

  it("expects a space's large state in the answers of all its sessions, a user's in the user's, a session's in its own", () => {
    const weights = createAnswerWeights({ partBytes: 100, capacity: 10 });
    weights.note(key('sp', 'u1', 's1'), states(500, 200, 1_000));
    expect(weights.any).toBe(true);
    expect(weights.expected(key('sp', 'u1', 's1'))).toBe(1_700);
    expect(weights.expected(key('sp', 'u1', 'other'))).toBe(1_200);
    expect(weights.expected(key('sp', 'u2', 'new'))).toBe(1_000);
    expect(weights.expected(key('other', 'u1', 's1'))).toBe(0);
    // The space's state shrank: forgotten.
    weights.note(key('sp', 'u2', 'new'), states(0, 0, 10));
    expect(weights.expected(key('sp', 'u1', 's1'))).toBe(700);
  });

  it('forgets the part answered longest ago past its capacity', () => {
    const weights = createAnswerWeights({ partBytes: 1, capacity: 2 });
    for (const space of ['a', 'b', 'c']) weights.note(key(space, 'u', 's'), states(0, 0, 5));
    expect(['a', 'b', 'c'].map((space) => weights.expected(key(space, 'u', 's')))).toEqual([0, 5, 5]);
  });
});
