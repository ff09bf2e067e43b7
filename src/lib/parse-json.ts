// JSON text to a value, correct on every Node the service runs on.
//
// V8 from 12.x (Node 23, 24, 25, 26) has an open bug (nodejs/node#63785, crbug 521080746): once
// JSON.parse has read an object key holding a backslash, say `\` or `a\`, it can give that key to a
// later object whose key is written with an escape and has the same length and the same leading
// raw text: after `{"\\":0}`, `{"\n":1}` and `{"\"":1}` both come back with the key `\`. The
// wrong key is taken from the parser's cache of object shapes, so it lasts for the whole process:
// one tenant's body with such a key would change the keys of every later tenant's state. The
// service's CI found it twice (a property test comparing JSON from PostgreSQL).
//
// What the bug needs bounds what this module does:
// - a key can only be read wrong into a key that holds a backslash, and only a key that holds a
//   backslash can teach the parser one. A backslash can only be written `\\` or `\u005c`.
// - so a text without such a key cannot teach the parser anything, and if no key of what
//   JSON.parse gave back holds a backslash, no key was read wrong.
// A text with a key that holds a backslash (rare) is read by `readJson` below and never reaches
// JSON.parse; any other text goes to JSON.parse, and in the rarer case that a key of its answer
// holds a backslash anyway (something outside this module, such as a library, taught the parser),
// the text is read again by `readJson`. test/unit/parse-json.test.ts checks both halves against
// the bug itself where the Node running it has it; test/integration/json-key-guard.test.ts checks
// the service's body parser and database reads, and CI runs it on Node 24.

/** JSON.parse, guarded against the V8 key bug above. Throws a SyntaxError for text that is not JSON. */
export function parseJson(text: string): unknown {
  if (writesKeyWithBackslash(text)) return readJson(text);
  const value: unknown = JSON.parse(text);
  return mayHaveBeenReadWrong(text, value) ? readJson(text) : value;
}

/**
 * Whether JSON.parse's answer `value` for `text`, a text whose keys hold no backslash
 * (writesKeyWithBackslash), may hold a key it was taught elsewhere: a key with a backslash, which
 * the text cannot have written. Such a text is read again by readJson.
 */
export function mayHaveBeenReadWrong(text: string, value: unknown): boolean {
  return text.includes('\\') && hasKeyWithBackslash(value);
}

// A backslash character written in JSON text: `\\` or `\u005c`. Both start with a backslash, so in
// a run of backslashes the leftmost match is where an escape starts.
const WRITTEN_BACKSLASH = /\\\\|\\u005[cC]/g;
// JSON's whitespace, sticky: read from lastIndex on (here and in readJson).
const WHITESPACE = /[ \t\n\r]*/y;

/**
 * Whether an object key of the JSON text `text` holds a backslash: only such a key can teach
 * JSON.parse a wrong one. A string is a key when `:` follows it. Each string holding a written
 * backslash is looked at once, so this is linear in the text; for text that is not JSON the answer
 * does not matter (JSON.parse and readJson both refuse it).
 */
export function writesKeyWithBackslash(text: string): boolean {
  if (!text.includes('\\')) return false;
  WRITTEN_BACKSLASH.lastIndex = 0;
  for (;;) {
    const match = WRITTEN_BACKSLASH.exec(text);
    if (match === null) return false;
    const quote = closingQuote(text, match.index + match[0].length);
    if (quote < 0) return false;
    WHITESPACE.lastIndex = quote + 1;
    WHITESPACE.test(text);
    if (text[WHITESPACE.lastIndex] === ':') return true;
    WRITTEN_BACKSLASH.lastIndex = WHITESPACE.lastIndex;
  }
}

/**
 * The index of the quote that ends the string `from` is inside of, or -1: `from` is just past the
 * opening quote or past an escape's end, since the quote's escaping is told by the backslashes before it.
 */
export function closingQuote(text: string, from: number): number {
  for (let at = from; ; ) {
    const quote = text.indexOf('"', at);
    if (quote < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(quote - 1 - backslashes) === 0x5c) backslashes++;
    if (backslashes % 2 === 0) return quote;
    at = quote + 1;
  }
}

/** Whether any object key in `value` holds a backslash. Iterative: deep values cannot overflow the stack. */
export function hasKeyWithBackslash(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item === null || typeof item !== 'object') continue;
    if (Array.isArray(item)) {
      for (const child of item) if (child !== null && typeof child === 'object') pending.push(child);
      continue;
    }
    for (const key of Object.keys(item)) {
      if (key.includes('\\')) return true;
      const child = (item as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object') pending.push(child);
    }
  }
  return false;
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
// Raw control characters end a run too: JSON refuses them inside strings.
// eslint-disable-next-line no-control-regex
const PLAIN_CHARACTERS = /[^"\\\u0000-\u001f]*/y;
const HEX4 = /[0-9a-fA-F]{4}/y;
const ESCAPED: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/** A container being read: an array, or an object and the key whose value comes next. */
type Open = { array: unknown[] } | { object: Record<string, unknown>; key: string };

/**
 * A strict JSON reader (RFC 8259) in plain JavaScript, for the texts JSON.parse must not see: the
 * same values JSON.parse gives (numbers through Number(), the last of repeated keys, `__proto__` an
 * own property), a SyntaxError for anything else. Iterative, like the other walks of client JSON.
 */
export function readJson(text: string): unknown {
  let at = 0;
  const fail = (): never => {
    throw new SyntaxError(`Unexpected token in JSON at position ${at}`);
  };
  const skipWhitespace = () => {
    WHITESPACE.lastIndex = at;
    WHITESPACE.test(text);
    at = WHITESPACE.lastIndex;
  };
  const readString = (): string => {
    if (text[at] !== '"') fail();
    at++;
    let result = '';
    for (;;) {
      PLAIN_CHARACTERS.lastIndex = at;
      PLAIN_CHARACTERS.test(text);
      result += text.slice(at, PLAIN_CHARACTERS.lastIndex);
      at = PLAIN_CHARACTERS.lastIndex;
      const stop = text[at];
      if (stop === '"') {
        at++;
        return result;
      }
      if (stop !== '\\') fail(); // a control character, or the end of the text
      const escape = text[at + 1];
      if (escape === 'u') {
        HEX4.lastIndex = at + 2;
        if (!HEX4.test(text)) fail();
        result += String.fromCharCode(parseInt(text.slice(at + 2, at + 6), 16));
        at += 6;
      } else {
        const character = escape === undefined ? undefined : ESCAPED[escape];
        if (character === undefined) fail();
        result += character;
        at += 2;
      }
    }
  };
  const readKey = (): string => {
    skipWhitespace();
    const key = readString();
    skipWhitespace();
    if (text[at] !== ':') fail();
    at++;
    return key;
  };

  const open: Open[] = [];
  for (;;) {
    // A value starts here.
    skipWhitespace();
    let value: unknown;
    const first = text[at];
    if (first === '{') {
      at++;
      skipWhitespace();
      if (text[at] === '}') {
        at++;
        value = {};
      } else {
        open.push({ object: {}, key: readKey() });
        continue;
      }
    } else if (first === '[') {
      at++;
      skipWhitespace();
      if (text[at] === ']') {
        at++;
        value = [];
      } else {
        open.push({ array: [] });
        continue;
      }
    } else if (first === '"') {
      value = readString();
    } else if (text.startsWith('true', at)) {
      at += 4;
      value = true;
    } else if (text.startsWith('false', at)) {
      at += 5;
      value = false;
    } else if (text.startsWith('null', at)) {
      at += 4;
      value = null;
    } else {
      NUMBER.lastIndex = at;
      if (!NUMBER.test(text)) fail();
      value = Number(text.slice(at, NUMBER.lastIndex));
      at = NUMBER.lastIndex;
    }
    // The value is whole: it goes into its container; a closed container is a value in turn.
    for (;;) {
      const container = open.at(-1);
      skipWhitespace();
      if (container === undefined) {
        if (at !== text.length) fail();
        return value;
      }
      if ('array' in container) {
        container.array.push(value);
        const next = text[at++];
        if (next === ',') break;
        if (next !== ']') fail();
        value = container.array;
      } else {
        setMember(container.object, container.key, value);
        const next = text[at++];
        if (next === ',') {
          container.key = readKey();
          break;
        }
        if (next !== '}') fail();
        value = container.object;
      }
      open.pop();
    }
  }
}

/** `object[key] = value` as JSON.parse does it: `__proto__` is an own property, not the prototype. */
function setMember(object: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') Object.defineProperty(object, key, { value, writable: true, enumerable: true, configurable: true });
  else object[key] = value;
}

const own = (object: object, key: string) => Object.prototype.hasOwnProperty.call(object, key);

/** The keys Fastify's JSON body parser refuses as prototype poisoning, as findPrototypeKey names them. */
export type PrototypeKey = '__proto__' | 'constructor.prototype';

/**
 * What `value` holds, at any depth, that Fastify's JSON body parser refuses as prototype poisoning
 * (its secure-json-parse with both actions 'error'): an own `__proto__` key, or a `constructor` key
 * whose value is an object with an own `prototype`; undefined when there is none. For the bodies
 * readJson reads instead of that parser, and for YAML bodies, which must meet the same rule.
 */
export function findPrototypeKey(value: unknown): PrototypeKey | undefined {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (item === null || typeof item !== 'object') continue;
    if (own(item, '__proto__')) return '__proto__';
    const constructor = own(item, 'constructor') ? (item as { constructor: unknown }).constructor : undefined;
    if (constructor !== null && typeof constructor === 'object' && own(constructor, 'prototype')) return 'constructor.prototype';
    // A loop, not push(...children): spreading a 100,000-element array overflows the argument limit.
    for (const child of Object.values(item)) if (child !== null && typeof child === 'object') pending.push(child);
  }
  return undefined;
}

export const hasPrototypeKey = (value: unknown): boolean => findPrototypeKey(value) !== undefined;
