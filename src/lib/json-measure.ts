// Measuring JSON values for the limits of docs/design.md §5.

/** How deep a request body may nest (http/body-nesting.ts); the values in it, one level less. */
export const MAX_BODY_NESTING = 256;

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

/**
 * Whether `value` holds NaN or ±Infinity at any depth: numbers JSON cannot write, which a JSON
 * number literal beyond a double's range (`1e400`) becomes in JSON.parse, and YAML's `.nan` and
 * `.inf` are. jsonb cannot store them and JSON.stringify writes them as null. Iterative, and
 * without a path (found, the caller names the field by a walk of its own): every JSON body runs it.
 */
export function holdsNonFiniteNumber(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) return true;
    } else if (Array.isArray(item)) {
      for (let index = 0; index < item.length; index++) {
        const child: unknown = item[index];
        if (child !== null && typeof child === 'object') pending.push(child);
        else if (typeof child === 'number' && !Number.isFinite(child)) return true;
      }
    } else if (item !== null && typeof item === 'object') {
      for (const key in item) {
        if (!Object.hasOwn(item, key)) continue;
        const child: unknown = (item as Record<string, unknown>)[key];
        if (child !== null && typeof child === 'object') pending.push(child);
        else if (typeof child === 'number' && !Number.isFinite(child)) return true;
      }
    }
  }
  return false;
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

/**
 * The length `JSON.stringify(JSON.parse(text))` would have, measured on the text without building
 * the value: how the context window measures events that PostgreSQL wrote as JSON text, so that a
 * read need not parse them only to count their characters (UTF-16 code units, like `.length`).
 *
 * It holds for JSON text as PostgreSQL writes it (json and jsonb output, to_json):
 * - strings count as written: PostgreSQL escapes exactly what JSON.stringify escapes (`"`, `\`,
 *   \b \f \n \r \t by name, other control characters as \u00xx), and the lone surrogates that
 *   JSON.stringify would escape cannot be stored (src/http/request-text.ts refuses them);
 * - whitespace between tokens does not count (jsonb writes `{"a": 1, "b": 2}`);
 * - a number counts as JavaScript writes it: jsonb keeps `1.50` and writes `1e21` in full.
 * Keys are unique in jsonb, so none is dropped by a parse. Malformed text gives a meaningless
 * count; it is never a JSON.parse error.
 */
export function compactJsonLength(text: string): number {
  let length = 0;
  let at = 0;
  const end = text.length;
  while (at < end) {
    const code = text.charCodeAt(at);
    if (code === QUOTE) {
      const close = closingQuote(text, at);
      length += close - at + 1;
      at = close + 1;
    } else if (code === SPACE || code === NEWLINE || code === RETURN || code === TAB) {
      at++;
    } else if (code === MINUS || (code >= DIGIT_0 && code <= DIGIT_9)) {
      const start = at;
      let plain = true; // digits with an optional leading minus: written the same by JavaScript
      at++;
      while (at < end) {
        const next = text.charCodeAt(at);
        if (next >= DIGIT_0 && next <= DIGIT_9) at++;
        else if (next === DOT || next === LOWER_E || next === UPPER_E || next === PLUS || next === MINUS) {
          plain = false;
          at++;
        } else break;
      }
      // Past 15 digits a double may round up to one more digit (99999999999999999 → 100000000000000000).
      if (plain && at - start <= 15) length += at - start;
      else {
        const value = Number(text.slice(start, at));
        length += Number.isFinite(value) ? String(value).length : 'null'.length;
      }
    } else {
      length++;
      at++;
    }
  }
  return length;
}

const [QUOTE, BACKSLASH, SPACE, NEWLINE, RETURN, TAB] = [0x22, 0x5c, 0x20, 0x0a, 0x0d, 0x09];
const [MINUS, PLUS, DOT, LOWER_E, UPPER_E, DIGIT_0, DIGIT_9] = [0x2d, 0x2b, 0x2e, 0x65, 0x45, 0x30, 0x39];

/** The index of the quote that closes the string opening at `open` (one not escaped by an odd run of backslashes). */
function closingQuote(text: string, open: number): number {
  let at = open + 1;
  for (;;) {
    const quote = text.indexOf('"', at);
    if (quote < 0) return text.length - 1;
    let before = quote - 1;
    while (text.charCodeAt(before) === BACKSLASH) before--;
    if ((quote - 1 - before) % 2 === 0) return quote;
    at = quote + 1;
  }
}
