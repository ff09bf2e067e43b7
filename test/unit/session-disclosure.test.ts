// What a write answer shows of a session (issue 10): contents only with session:DescribeSessions.
import { describe, expect, it } from 'vitest';
import type { PolicyStatementValue } from '../../src/lib/policy.js';
import { maySeeSessionContents, writtenSessionAnswer } from '../../src/modules/sessions/session-disclosure.js';
import type { SessionView } from '../../src/modules/sessions/session.model.js';

const A = 'space-00000000-0000-4000-8000-00000000000a';
const B = 'space-00000000-0000-4000-8000-00000000000b';
const sub = (statements: PolicyStatementValue[]) => ({ kind: 'sub' as const, statements });

const session: SessionView = {
  spaceId: A,
  userId: 'u',
  sessionId: 's',
  title: 't',
  metadata: { k: 'v' },
  state: { secret: 1 },
  memo: { note: 'm' },
  windowStartSeq: 1,
  eventCount: 2,
  revision: 3,
  createTime: '2026-01-01T00:00:00.000Z',
  updateTime: '2026-01-01T00:00:01.000Z',
  expireTime: null,
};

describe('maySeeSessionContents', () => {
  it('allows the root, and a sub-account allowed session:DescribeSessions on that space', () => {
    expect(maySeeSessionContents({ kind: 'root', statements: [] }, A)).toBe(true);
    expect(maySeeSessionContents(sub([{ effect: 'allow', actions: ['session:Describe*'], resources: [`space/${A}`] }]), A)).toBe(true);
    expect(maySeeSessionContents(sub([{ effect: 'allow', actions: ['session:*'], resources: ['space/*'] }]), B)).toBe(true);
  });

  it('refuses a writer without the read, one allowed elsewhere, and one denied the read', () => {
    expect(maySeeSessionContents(sub([{ effect: 'allow', actions: ['session:AppendEvent'], resources: [`space/${A}`] }]), A)).toBe(false);
    expect(maySeeSessionContents(sub([{ effect: 'allow', actions: ['session:*'], resources: [`space/${B}`] }]), A)).toBe(false);
    const denied = sub([
      { effect: 'allow', actions: ['session:*'], resources: ['*'] },
      { effect: 'deny', actions: ['session:DescribeSessions'], resources: [`space/${A}`] },
    ]);
    expect(maySeeSessionContents(denied, A)).toBe(false);
    expect(maySeeSessionContents(denied, B)).toBe(true);
  });
});

describe('writtenSessionAnswer', () => {
  it('keeps the whole session, or drops exactly title, metadata, state and memo', () => {
    expect(writtenSessionAnswer(session, true)).toEqual(session);
    const { title: _t, metadata: _m, state: _s, memo: _memo, ...summary } = session;
    expect(writtenSessionAnswer(session, false)).toStrictEqual(summary);
  });
});
