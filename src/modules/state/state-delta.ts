// Applying an event's stateDelta to a state object, and measuring JSON for the limits of SPEC §5.
// Pure: no I/O, inputs are never mutated.
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

/**
 * Nesting depth of a JSON value: a scalar is 0, `{}` and `[]` are 1, `{"a":{"b":1}}` is 2.
 * Iterative, so that a hostile, deeply nested value cannot overflow the call stack.
 */
export function jsonDepth(value: unknown): number {
  let deepest = 0;
  const pending: [unknown, number][] = [[value, 0]];
  while (pending.length > 0) {
    const [item, depth] = pending.pop()!;
    if (item === null || typeof item !== 'object') continue;
    const here = depth + 1;
    if (here > deepest) deepest = here;
    for (const child of Array.isArray(item) ? (item as unknown[]) : Object.values(item)) {
      if (child !== null && typeof child === 'object') pending.push([child, here]);
    }
  }
  return deepest;
}

/** Size in bytes of the value serialized as compact JSON (UTF-8): what the size limits measure. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}
