// The session as the API shows it, shared by the sessions and events modules.
import { z } from 'zod';
import type { SessionKey } from '../../db/keys.js';
import type { SessionRow } from '../../db/schema.js';
import { JsonObject, JsonValue, Timestamp } from '../../http/schemas.js';
import { mergedStateView, type SharedStates } from '../state/index.js';

export const Session = z
  .object({
    spaceId: z.string(),
    userId: z.string(),
    sessionId: z.string(),
    title: z.string(),
    metadata: z.record(z.string(), z.string()),
    state: JsonObject.describe(
      'The merged state view: the session\'s own keys, plus the user\'s `user:*` keys (shared by all sessions of the user in the space) ' +
        'and the space\'s `app:*` keys (shared by every user of the space). All are changed by the stateDelta of events; `temp:*` keys are never stored.',
    ),
    memo: JsonValue.nullable(),
    windowStartSeq: z.number().int(),
    eventCount: z.number().int(),
    revision: z.number().int().describe('Incremented by every change; the ETag is "<revision>".'),
    createTime: Timestamp,
    updateTime: Timestamp,
    expireTime: Timestamp.nullable(),
  })
  .meta({ id: 'Session' });

export type SessionView = z.infer<typeof Session>;

/**
 * The session as a write (create, modify, append, context, import) answers it. The same fields as
 * `Session`, but the contents (title, metadata, state, memo) are present only when the caller may
 * also describe sessions in the space: a principal allowed to write but not to read learns the
 * session's revision, counts and times (for ETag / If-Match), never what it holds.
 */
export const WrittenSession = Session.partial({ title: true, metadata: true, state: true, memo: true })
  .describe(
    'The session after the write. title, metadata, state and memo are present only if the caller is allowed ' +
      'session:DescribeSessions on the space (the root always is); the other fields are always present.',
  )
  .meta({ id: 'WrittenSession' });

export type WrittenSessionView = z.infer<typeof WrittenSession>;

/** A session view whose `state` is whatever is given in its place. */
export type SessionViewWith<State> = Omit<SessionView, 'state'> & { state: State };

/** The columns of a session row that its view shows, but for the ids and the state. */
export type SessionViewColumns = Pick<
  SessionRow,
  'title' | 'metadata' | 'memo' | 'window_start_seq' | 'event_count' | 'revision' | 'create_time' | 'update_time' | 'expire_time'
>;

/**
 * The view of the session `ids` whose row is `row`, with `state` as given, the fields in the
 * schema's order. The append's answer gives its merged state as JSON text instead of an object
 * (modules/events/append.service.ts). The ids come apart from the row so that the append, whose
 * row has none, need not copy its row to add them (a copy cost 5 µs of the answer's 12).
 */
export function sessionViewWith<State>(ids: Omit<SessionKey, 'accountId'>, row: SessionViewColumns, state: State): SessionViewWith<State> {
  return {
    spaceId: ids.spaceId,
    userId: ids.userId,
    sessionId: ids.sessionId,
    title: row.title,
    metadata: row.metadata,
    state,
    memo: row.memo,
    windowStartSeq: row.window_start_seq,
    eventCount: row.event_count,
    revision: row.revision,
    createTime: row.create_time.toISOString(),
    updateTime: row.update_time.toISOString(),
    expireTime: row.expire_time ? row.expire_time.toISOString() : null,
  };
}

/** Callers outside the sessions module read a session through `readSessionView` (sessions.service). */
export function toSessionView(row: Omit<SessionRow, 'initial_state'>, shared: SharedStates): SessionView {
  const ids = { spaceId: row.space_id, userId: row.user_id, sessionId: row.session_id };
  return sessionViewWith(ids, row, mergedStateView({ session: row.state, user: shared.user, app: shared.app }));
}

/** The live session as PostgreSQL wrote it (src/db/session-json-sql.ts): its JSON, the memo's, and what the routes need besides. */
export interface SessionJsonRow {
  revision: number;
  window_start_seq: number;
  event_count: number;
  /** The memo as JSON text; null when there is none (the view shows JSON null). */
  memo_json: string | null;
  session_json: string;
}
