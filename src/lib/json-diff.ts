// What changed between two JSON objects, key path by key path: the console highlights these as the
// change one event made to the state. Objects are compared key by key, recursively; anything else
// (arrays, scalars, a value that changed type) counts as replaced whole, as a merge patch replaces it.
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonRecord = { [key: string]: Json };

export interface JsonChange {
  /** Keys from the top of the object down to the value that changed. */
  path: string[];
  kind: 'added' | 'removed' | 'changed';
  before?: Json;
  after?: Json;
}

const isRecord = (value: Json | undefined): value is JsonRecord => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Deep equality of JSON values (key order does not matter, array order does). */
export function jsonEqual(a: Json, b: Json): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((item, index) => jsonEqual(item, b[index]!));
  }
  if (!isRecord(a) || !isRecord(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key]!, b[key]!));
}

/** The changes from `before` to `after`, in key order of `before` then the added keys of `after`. */
export function diffJson(before: JsonRecord, after: JsonRecord, path: string[] = []): JsonChange[] {
  const changes: JsonChange[] = [];
  for (const key of Object.keys(before)) {
    const here = [...path, key];
    if (!Object.hasOwn(after, key)) changes.push({ path: here, kind: 'removed', before: before[key]! });
    else if (isRecord(before[key]) && isRecord(after[key])) changes.push(...diffJson(before[key], after[key], here));
    else if (!jsonEqual(before[key]!, after[key]!)) changes.push({ path: here, kind: 'changed', before: before[key]!, after: after[key]! });
  }
  for (const key of Object.keys(after)) {
    if (!Object.hasOwn(before, key)) changes.push({ path: [...path, key], kind: 'added', after: after[key]! });
  }
  return changes;
}
