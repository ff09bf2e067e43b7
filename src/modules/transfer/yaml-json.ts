// The JSON value of a parsed YAML document, or the first thing in it JSON cannot say, named by field.
//
// The yaml package answers more than JSON's types, even with the core schema: explicit tags still
// give binary data (`!!binary` → Uint8Array), sets (`!!set`) and timestamps (`!!timestamp` → Date);
// a key may be a collection (`? [1, 2]`, which it would turn into the text "[ 1, 2 ]" with a process
// warning); `1` and `"1"` are two keys to YAML and one to JSON; and an integer a double does not
// hold as written would be rounded, which a JSON body refuses (lib/inexact-integer.ts). Request
// schemas check JSON values as any value (http/schemas.ts, JsonValue), so an import that held such
// a value stored something else (a Uint8Array as {"type":"Buffer","data":[…]}, a Set as {})
// without a word.
// The document is therefore parsed with maps as Map and integers as BigInt, and this walk builds
// the plain JSON value from it, refusing what has no JSON counterpart.
//
// It also refuses a document that contains itself (an alias inside its own anchor): every later walk
// would go round it for ever. Iterative, so a deep document cannot overflow the stack.
import { inexactIntegerRule } from '../../lib/inexact-integer.js';
import { jsonPathName } from '../../lib/json-path.js';

/** Why a YAML document is not a JSON value, with the field (`session.state.x`, `body` for the root). */
export class YamlValueError extends Error {
  override name = 'YamlValueError';
  constructor(
    readonly field: string,
    readonly rule: string,
  ) {
    super(`${field}: ${rule}`);
  }
}

const NOT_A_JSON_VALUE = 'must be a JSON value: YAML tags for binary data, sets and timestamps have no JSON counterpart';
const NOT_A_JSON_KEY = 'must have scalar keys: a YAML key that is a collection, binary data or a timestamp has no JSON counterpart';
const CYCLE = 'an alias refers to a node that contains it: a JSON document cannot hold a cycle';

type Key = string | number;
type Container = unknown[] | Record<string, unknown>;

/**
 * A collection being converted: its entries, the next one to take, what it becomes, and its key in
 * the collection above it. The stack of frames is the path to the value being looked at, so a
 * field is named from it only when something is refused.
 */
interface Frame {
  source: object;
  entries: [Key, unknown][];
  next: number;
  target: Container;
  key: Key | undefined;
}

/**
 * The JSON value of `value`, which the yaml package parsed with `mapAsMap: true` and
 * `intAsBigInt: true`. Throws YamlValueError. Maps become plain objects whose keys are the text of
 * their scalar keys, as the package itself writes them (`null` → "", 1 → "1"); a `__proto__` key
 * is an own property, for the prototype-key check after this.
 */
export function jsonValueOfYaml(value: unknown): unknown {
  const stack: Frame[] = [];
  const fieldOf = (key?: Key) => fieldName([...stack.map((frame) => frame.key), key]);
  const root = convert(value, undefined, fieldOf);
  if (!('frame' in root)) return root.scalar;
  stack.push(root.frame);
  const onPath = new Set<object>([root.frame.source]);
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    if (top.next === top.entries.length) {
      onPath.delete(top.source);
      stack.pop();
      continue;
    }
    const [key, child] = top.entries[top.next++]!;
    const converted = convert(child, key, fieldOf);
    if ('scalar' in converted) {
      put(top.target, key, converted.scalar);
      continue;
    }
    if (onPath.has(converted.frame.source)) throw new YamlValueError(fieldOf(key), CYCLE);
    onPath.add(converted.frame.source);
    put(top.target, key, converted.frame.target);
    stack.push(converted.frame);
  }
  return root.frame.target;
}

/** `value` (at `key` of the collection on top of the stack) as a JSON scalar, or a frame to convert its entries. */
function convert(value: unknown, key: Key | undefined, fieldOf: (key?: Key) => string): { scalar: unknown } | { frame: Frame } {
  if (typeof value === 'bigint') {
    const rule = inexactIntegerRule(String(value));
    if (rule) throw new YamlValueError(fieldOf(key), rule);
    return { scalar: Number(value) };
  }
  if (value === null || typeof value !== 'object') return { scalar: value };
  if (Array.isArray(value)) return { frame: { source: value, entries: value.map((item, index) => [index, item]), next: 0, target: [], key } };
  if (value instanceof Map) return { frame: { source: value, entries: mapEntries(value, () => fieldOf(key)), next: 0, target: {}, key } };
  // A Set, a Uint8Array, a Date: what the package's extra tags give.
  throw new YamlValueError(fieldOf(key), NOT_A_JSON_VALUE);
}

function mapEntries(map: Map<unknown, unknown>, field: () => string): [Key, unknown][] {
  const entries: [Key, unknown][] = [];
  const seen = new Set<string>();
  for (const [key, item] of map) {
    const text = keyText(key);
    if (text === undefined) throw new YamlValueError(field(), NOT_A_JSON_KEY);
    if (seen.has(text)) throw new YamlValueError(field(), `has the key ${JSON.stringify(text)} twice: YAML keys that differ only in type (1 and "1") are one JSON key`);
    seen.add(text);
    entries.push([text, item]);
  }
  return entries;
}

/** The JSON key of a scalar YAML key, as the yaml package writes it into an object; undefined for any other. */
function keyText(key: unknown): string | undefined {
  if (key === null) return '';
  if (typeof key === 'object') return undefined;
  return String(key);
}

function put(target: Container, key: Key, value: unknown): void {
  if (Array.isArray(target)) target.push(value);
  else Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true });
}

/** `session.memo[1]` style, as validation errors name fields; `body` for the document itself. */
const fieldName = (path: (Key | undefined)[]): string => jsonPathName(path.filter((key) => key !== undefined)) || 'body';
