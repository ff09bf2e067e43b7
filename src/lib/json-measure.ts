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

/**
 * Size in bytes of a state as PostgreSQL writes it (jsonb's text form): what the state size limit
 * measures. The append merges deltas inside the database and checks the limit there, on
 * `octet_length(state::text)`; every other check of the same limit (session create, import) counts
 * the same way, so a state never passes one check and fails another. jsonb's text is compact JSON
 * with one space after each ':' and ',' between members, and numbers written without exponents
 * (1e21 is 1000000000000000000000).
 */
export function stateBytes(value: unknown): number {
  let extra = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'number') {
      extra += plainNumberLength(item) - JSON.stringify(item).length;
    } else if (Array.isArray(item)) {
      if (item.length > 1) extra += item.length - 1;
      for (const child of item) pending.push(child);
    } else if (item !== null && typeof item === 'object') {
      const children = Object.values(item);
      extra += children.length + Math.max(0, children.length - 1);
      for (const child of children) pending.push(child);
    }
  }
  return jsonBytes(value) + extra;
}

/** Length of the number written in plain decimal notation, as PostgreSQL's numeric output does. */
function plainNumberLength(value: number): number {
  const text = JSON.stringify(value);
  const exponentAt = text.indexOf('e');
  if (exponentAt < 0) return text.length;
  const sign = value < 0 ? 1 : 0;
  const mantissa = text.slice(sign, exponentAt);
  const exponent = Number(text.slice(exponentAt + 1));
  const point = mantissa.indexOf('.');
  const digits = mantissa.replace('.', '').length;
  const integerDigits = (point < 0 ? mantissa.length : point) + exponent;
  // 1.5e+21 → 1500000000000000000000; 1.5e-7 → 0.00000015
  if (integerDigits >= digits) return sign + integerDigits;
  if (integerDigits > 0) return sign + digits + 1;
  return sign + 2 + -integerDigits + digits;
}
