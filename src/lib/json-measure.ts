// Measuring JSON values for the limits of SPEC §5.

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
