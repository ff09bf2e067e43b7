// RFC 7396 JSON Merge Patch. Pure: returns a new value and never mutates its inputs.
import type { JsonValue } from '../../db/schema.js';

const isObject = (value: unknown): value is { [key: string]: JsonValue } =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

export function applyMergePatch(target: JsonValue | undefined, patch: JsonValue): JsonValue {
  if (!isObject(patch)) return patch;
  const result: { [key: string]: JsonValue } = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}
