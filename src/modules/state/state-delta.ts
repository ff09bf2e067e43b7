// Applying an event's stateDelta to a state object. Pure: no I/O, inputs are never mutated.
import type { JsonObject } from '../../db/schema.js';
import { applyMergePatch } from './merge-patch.js';

export const STATE_DELTA_MODES = ['merge-patch', 'replace'] as const;
export type StateDeltaMode = (typeof STATE_DELTA_MODES)[number];

/**
 * `merge-patch` (the default) is RFC 7396: objects merge recursively and `null` deletes a key.
 * `replace` is Google ADK's behaviour: each top-level key of the delta replaces the stored value
 * whole, and `null` is stored as a value rather than deleting the key.
 */
export function applyStateDelta(state: JsonObject, delta: JsonObject, mode: StateDeltaMode = 'merge-patch'): JsonObject {
  if (mode === 'replace') return { ...state, ...delta };
  return applyMergePatch(state, delta) as JsonObject;
}
