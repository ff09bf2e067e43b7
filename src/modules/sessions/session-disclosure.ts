// What a write answer may show of a session (issue 10). A principal allowed to write a session
// (create, modify, append, import) but not to read it must not read it through the write's answer:
// without session:DescribeSessions on the space the answer keeps the ids, counts, revision and
// times (the caller needs the revision for If-Match) and drops the contents. Decided once per
// request from the policy already loaded with the principal: no database round trip. Pure.
import type { Principal } from '../../lib/principal.js';
import { isAllowed, spaceResource } from '../../lib/policy.js';
import type { SessionView, WrittenSessionView } from './session.model.js';

/** Whether `principal` may see a session's title, metadata, state and memo in `spaceId`. */
export function maySeeSessionContents(principal: Pick<Principal, 'kind' | 'statements'>, spaceId: string): boolean {
  return principal.kind === 'root' || isAllowed(principal.statements, 'session:DescribeSessions', spaceResource(spaceId));
}

/** The session as a write answers it: whole, or without its contents. */
export function writtenSessionAnswer(session: SessionView, showContents: boolean): WrittenSessionView {
  if (showContents) return session;
  const { title: _title, metadata: _metadata, state: _state, memo: _memo, ...summary } = session;
  return summary;
}
