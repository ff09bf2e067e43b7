// The sessions module's public entry: the session's models and disclosure rules, its services,
// and the service functions other modules call inside their own transactions (session-rows.service.ts).
export { VALUE_TOO_LONG, metadataIssues } from './metadata-rules.js';
export { maySeeSessionContents, writtenSessionAnswer } from './session-disclosure.js';
export { sessionNotFound } from './session-not-found.js';
export {
  Session,
  type SessionJsonRow,
  type SessionView,
  type SessionViewWith,
  WrittenSession,
  type WrittenSessionView,
  sessionViewWith,
  toSessionView,
} from './session.model.js';
export {
  type LockedSession,
  deleteSessionRow,
  ensureSpaceUser,
  findLiveSessionWithScopes,
  insertSessionIfAbsent,
  lockSession,
} from './session-rows.service.js';
export { sessionSchemas } from './sessions.schemas.js';
export { MEMO_MAX_BYTES, assertValidMetadata, createSession, deleteSession, describeSession, listSessions, modifySession, readSessionView } from './sessions.service.js';
// For the wiring (src/routes.ts, src/server.ts).
export { type ExpirySweeper, startExpirySweeper } from './expiry-sweeper.js';
export { sessionsRoutes } from './sessions.routes.js';
