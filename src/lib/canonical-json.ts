// JSON with object keys sorted at every level: equal values always give equal text, whatever the
// key order a client happened to send.
//
// Every append hashes each of its events' canonical text, so this runs on the hot path (issue 24).
// It writes the text in one pass instead of JSON.stringify with a replacer that made a sorted copy
// of every object, and it keeps that older text byte for byte: stored payload hashes were computed
// from it, and a retry of an event stored before must hash the same (test/unit/canonical-json.test.ts).
// One rule of that text is easy to miss: the sorted copy was a plain object, and a plain object
// lists its integer-like keys ("0", "7", "10") first, in numeric order, whatever order they were
// inserted in; so does this text. And assigning a `__proto__` key to that copy set its prototype
// instead of adding the key, so the key never appeared; it does not here either.
import { hash } from 'node:crypto';

/** Typed as a string, as JSON.stringify is: only a value it leaves out (undefined) gives undefined. */
export function canonicalJson(value: unknown): string {
  return write(value) as string;
}

/** The text of `value`, or undefined where JSON.stringify leaves the value out (undefined, a function, a symbol). */
function write(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  const json = (value as { toJSON?: unknown }).toJSON;
  if (typeof json === 'function') return write((json as () => unknown).call(value));
  if (Array.isArray(value)) {
    let text = '[';
    for (let index = 0; index < value.length; index++) {
      if (index > 0) text += ',';
      text += write(value[index]) ?? 'null';
    }
    return `${text}]`;
  }
  const object = value as Record<string, unknown>;
  let text = '{';
  let first = true;
  for (const key of sortedKeys(object)) {
    if (key === '__proto__') continue;
    const item = write(object[key]);
    if (item === undefined) continue;
    text += `${first ? '' : ','}${JSON.stringify(key)}:${item}`;
    first = false;
  }
  return `${text}}`;
}

/** Integer-like keys in numeric order, then the others in code-unit order: a plain object's own order once sorted. */
function sortedKeys(object: Record<string, unknown>): string[] {
  const keys = Object.keys(object);
  if (keys.length < 2) return keys;
  // Object.keys already lists the integer-like keys first, in numeric order; only the rest need sorting.
  let indexKeys = 0;
  while (indexKeys < keys.length && isArrayIndex(keys[indexKeys]!)) indexKeys++;
  if (indexKeys === 0) return keys.sort();
  return [...keys.slice(0, indexKeys), ...keys.slice(indexKeys).sort()];
}

/** A key that an object orders as an integer: a canonical decimal below 2^32 − 1. */
function isArrayIndex(key: string): boolean {
  const first = key.charCodeAt(0);
  if (first < 48 || first > 57) return false;
  if (key === '0') return true;
  if (first === 48 || key.length > 10) return false;
  for (let at = 1; at < key.length; at++) {
    const code = key.charCodeAt(at);
    if (code < 48 || code > 57) return false;
  }
  return Number(key) < 4294967295;
}

/** One-shot: no Hash object per call (crypto.hash, Node 20.12 and later). */
export function sha256(text: string): Buffer {
  return hash('sha256', text, 'buffer');
}

/**
 * The same digest as lowercase hex. Where text is what is wanted, asking crypto.hash for it costs
 * about 0.33 µs; a Buffer result costs about 0.8 (Node 20 and 24 alike), and its hex another 0.3.
 */
export function sha256Hex(text: string): string {
  return hash('sha256', text, 'hex');
}
