// The state module's public entry: what other modules may use of the session, user and space
// state (scopes, deltas, merge patch, the shared states' locks and limits). Nothing here reads events.
export { applyMergePatch } from './merge-patch.js';
export {
  APP_PREFIX,
  STORED_SCOPES,
  type StoredScope,
  USER_PREFIX,
  applyScopedDelta,
  mergedStateText,
  mergedStateView,
  scopesTouched,
  splitByScope,
  withoutTempKeys,
} from './scoped-state.js';
export { type SharedStates, assertStateWithinLimit, lockSharedStates, saveSharedStates, stateLimitExceeded } from './shared-state.js';
export { STATE_DELTA_MODES, type StateDeltaMode, applyStateDelta } from './state-delta.js';
