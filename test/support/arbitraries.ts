// fast-check arbitraries for hostile HTTP input: strings and JSON that databases and parsers choke
// on, bodies that are not JSON or not UTF-8, path ids and query strings, and "valid-ish" values
// generated from the JSON Schemas that the zod schemas become in the app's OpenAPI document, so a
// property gets past validation often enough to exercise the services too.
import fc from 'fast-check';

// ---------------------------------------------------------------------------------------------
// Strings

/** Values that have broken services before: NUL, lone surrogates, BOM, RTL override, SQL, paths… */
export const NASTY_STRINGS = [
  '',
  ' ',
  '\t\r\n',
  '\u0000',
  'a\u0000b',
  '\ud800',
  'x\udfffy',
  '\ud83d', // the first half of an emoji
  '\ufeffbom',
  '\u202eevil',
  '\uffff',
  '..',
  '../../etc/passwd',
  '%00',
  '%',
  '%zz',
  '_',
  '\\',
  "'; DROP TABLE sessions;--",
  'null',
  'true',
  '0',
  '-1',
  '1e309',
  'NaN',
  '__proto__',
  'constructor',
  'user:',
  'app:',
  'temp:',
  'user:x',
  'app:x',
  'temp:x',
  '*',
  '"1"',
  'W/"1"',
  '🦀🦀🦀',
  'e\u0301', // a combining sequence
] as const;

const loneSurrogate = fc.integer({ min: 0xd800, max: 0xdfff }).map((code) => String.fromCharCode(code));
const nastyChar = fc.oneof(
  fc.constantFrom('\u0000', '\u0001', '\u007f', '\u0085', '\u2028', '\ufeff', '%', '/', '.', '\\', '"', "'", '&', '=', '?', '#', ':', '*'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
  loneSurrogate,
);

/** Lengths that cross the usual field limits (128, 256, 512), the event limit and the 1 MiB body limit. */
export const HUGE_LENGTHS = [129, 257, 513, 2049, 70_000, 300_000, 1_100_000] as const;
export const hugeString = fc.constantFrom(...HUGE_LENGTHS).map((length) => 'x'.repeat(length));

export function hostileString(maxLength = 40): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength }) },
    { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength }) },
    { weight: 3, arbitrary: fc.string({ unit: nastyChar, maxLength }) },
    { weight: 3, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
    { weight: 1, arbitrary: hugeString },
  );
}

/** Object keys: ordinary, nasty, and the prototype-poisoning ones. */
export const hostileKey = fc.oneof(
  { weight: 3, arbitrary: fc.string({ maxLength: 12 }) },
  { weight: 2, arbitrary: fc.constantFrom(...NASTY_STRINGS) },
  { weight: 1, arbitrary: fc.string({ unit: nastyChar, minLength: 1, maxLength: 6 }) },
);

const hostileNumber = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, -1, 1.5, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 2 ** 63, -(2 ** 63), 1e308, -1e308, 5e-324),
);

const hostileScalar = fc.oneof(hostileString(), hostileNumber, fc.boolean(), fc.constant(null));

/** Any JSON value, with hostile strings, keys and numbers, at most `maxDepth` levels deep. */
export function hostileJson(maxDepth = 4): fc.Arbitrary<unknown> {
  const { value } = fc.letrec((tie) => ({
    value: fc.oneof(
      { maxDepth, depthSize: 'small' },
      hostileScalar,
      fc.array(tie('value'), { maxLength: 4 }),
      fc.dictionary(hostileKey, tie('value'), { maxKeys: 4 }),
    ),
  }));
  return value;
}

// ---------------------------------------------------------------------------------------------
// Raw bodies

/** A raw request body and the Content-Type it is sent with (undefined: no header). */
export interface RawBody {
  kind: string;
  payload: string | Buffer;
  contentType: string | undefined;
}

/** JSON nested far beyond any limit: arrays, objects, or inside a field. */
export const deeplyNestedJson: fc.Arbitrary<RawBody> = fc
  .record({ depth: fc.integer({ min: 100, max: 20_000 }), shape: fc.constantFrom('array', 'object', 'field') })
  .map(({ depth, shape }) => {
    const inner = shape === 'array' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    const payload = shape === 'field' ? `{"name":${inner},"author":${inner}}` : inner;
    return { kind: `nested-${shape}-${depth}`, payload, contentType: 'application/json' };
  });

/** Byte sequences that are not UTF-8: stray continuation bytes, overlong forms, surrogates, > U+10FFFF. */
export const INVALID_UTF8 = [
  [0xff],
  [0xfe],
  [0x80],
  [0xbf],
  [0xc0, 0x80], // overlong NUL
  [0xc1, 0xbf],
  [0xe0, 0x80, 0xaf], // overlong '/'
  [0xed, 0xa0, 0x80], // an encoded surrogate (CESU-8)
  [0xf4, 0x90, 0x80, 0x80], // beyond U+10FFFF
  [0xf8, 0x88, 0x80, 0x80, 0x80],
  [0xe2, 0x82], // truncated
] as const;

/** A JSON text with bytes that are not UTF-8 spliced in after one of its quotes (inside or outside a string). */
export function withInvalidUtf8(jsonText: string): fc.Arbitrary<RawBody> {
  const quotes = [...jsonText.matchAll(/"/g)].map((match) => match.index);
  return fc.record({ at: fc.nat(), bytes: fc.constantFrom(...INVALID_UTF8) }).map(({ at, bytes }) => {
    const split = quotes.length === 0 ? 0 : quotes[at % quotes.length]! + 1;
    const payload = Buffer.concat([Buffer.from(jsonText.slice(0, split)), Buffer.from(bytes), Buffer.from(jsonText.slice(split))]);
    return { kind: 'invalid-utf8', payload, contentType: 'application/json' };
  });
}

export const NON_JSON_CONTENT_TYPES = [
  'text/plain',
  'text/html',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/octet-stream',
  'application/xml',
  'application/json-patch+json',
  'application/jsonx',
  'application/yaml',
  'text/yaml',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  '*/*',
  'garbage',
  ';;;',
] as const;

/** YAML the import route must survive: an alias bomb, custom tags, deep flow nesting, two documents. */
export const HOSTILE_YAML = [
  `a: &a [x, x, x, x, x, x, x, x, x]\n${Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9).fill(`*${String.fromCharCode(97 + i)}`).join(', ')}]`).join('\n')}\n`,
  'x: !!js/function "function () { return 1 }"\n',
  'x: !!binary aGVsbG8=\n',
  `${'['.repeat(5_000)}${']'.repeat(5_000)}\n`,
  '--- 1\n--- 2\n',
  'a: 1\na: 2\n',
  '__proto__: {polluted: true}\n',
  'a: [',
  '---\n- 1\n',
] as const;

export function nonJsonBody(jsonText: string): fc.Arbitrary<RawBody> {
  return fc
    .record({ contentType: fc.constantFrom(...NON_JSON_CONTENT_TYPES), payload: fc.constantFrom(jsonText, 'name=x&a=b', '<a/>', ...HOSTILE_YAML) })
    .map(({ contentType, payload }) => ({ kind: `content-type ${contentType}`, payload, contentType }));
}

export const emptyBody: fc.Arbitrary<RawBody> = fc
  .constantFrom<[string, string | undefined]>(['', 'application/json'], ['', undefined], ['   ', 'application/json'], ['null', 'application/json'], ['\ufeff{}', 'application/json'])
  .map(([payload, contentType]) => ({ kind: `empty ${JSON.stringify(payload)}`, payload, contentType }));

// ---------------------------------------------------------------------------------------------
// Values from JSON Schema (the app's OpenAPI document, generated from its zod schemas)

export type JsonSchema = { [keyword: string]: unknown };

/** Resolves the `#/…` JSON pointers of the OpenAPI document's `$ref`s. */
export type RefResolver = (ref: string) => JsonSchema | undefined;

export function refResolver(document: unknown): RefResolver {
  return (ref) => {
    let node: unknown = document;
    for (const segment of ref.replace(/^#/, '').split('/').filter(Boolean)) {
      node = (node as Record<string, unknown> | undefined)?.[decodeURIComponent(segment.replace(/~1/g, '/').replace(/~0/g, '~'))];
    }
    return node && typeof node === 'object' ? (node as JsonSchema) : undefined;
  };
}

const RFC3339_EDGES = [
  '0000-01-01T00:00:00Z',
  '0000-12-31T23:59:59.999Z',
  '0001-01-01T00:00:00+00:01', // year 0 once the offset is applied
  '9999-12-31T23:59:59-00:01', // year 10000 once the offset is applied
  '0001-01-01T00:00:00Z',
  '1969-12-31T23:59:59.999Z',
  '1970-01-01T00:00:00Z',
  '2038-01-19T03:14:08Z',
  '9999-12-31T23:59:59.999999999Z',
  '2000-02-29T00:00:00+23:59',
  '2000-01-01T00:00:00-23:59',
] as const;

const timestamp = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...RFC3339_EDGES) },
  fc.date({ min: new Date('1900-01-01T00:00:00Z'), max: new Date('2200-01-01T00:00:00Z'), noInvalidDate: true }).map((date) => date.toISOString()),
  fc.integer({ min: -5, max: 5 }).map((seconds) => new Date(Date.now() + seconds * 1000).toISOString()),
);

function stringArbitrary(schema: JsonSchema): fc.Arbitrary<string> {
  if (schema.format === 'date-time') return timestamp;
  // Ids and the like: matching strings, and now and then a hostile one that does not match.
  if (typeof schema.pattern === 'string') return fc.oneof({ weight: 6, arbitrary: fc.stringMatching(new RegExp(schema.pattern)) }, { weight: 1, arbitrary: hostileString() });
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : undefined;
  // Cut or pad rather than filter: a filter that rarely passes would stall generation.
  const fit = (s: string) => (max !== undefined && s.length > max ? s.slice(0, max) : s.padEnd(min, 'x'));
  const edges = [min, max].filter((n): n is number => n !== undefined).map((n) => 'x'.repeat(n));
  return fc.oneof(
    { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: Math.max(min, Math.min(max ?? 24, 24)) }) },
    { weight: 3, arbitrary: hostileString().map(fit) },
    { weight: 1, arbitrary: edges.length > 0 ? fc.constantFrom(...edges) : fc.constant('x'.repeat(min)) },
  );
}

function numberArbitrary(schema: JsonSchema): fc.Arbitrary<number> {
  const integer = schema.type === 'integer';
  const min = typeof schema.minimum === 'number' ? schema.minimum : integer ? Number.MIN_SAFE_INTEGER : -1e15;
  const max = typeof schema.maximum === 'number' ? schema.maximum : integer ? Number.MAX_SAFE_INTEGER : 1e15;
  const edges = [min, max, min + 1, max - 1, 0, 1].filter((n) => n >= min && n <= max);
  const within = integer
    ? fc.integer({ min: Math.max(min, Number.MIN_SAFE_INTEGER), max: Math.min(max, Number.MAX_SAFE_INTEGER) })
    : fc.double({ min, max, noNaN: true });
  return fc.oneof(fc.constantFrom(...edges), within);
}

/**
 * Values that (mostly) satisfy `schema`: required fields always, optional ones sometimes, lengths
 * and numbers at their boundaries, strings with hostile characters where the schema allows any.
 * Zod's refinements (cross-field rules) are not in JSON Schema, so some values still fail them.
 */
export function fromSchema(schema: JsonSchema | undefined, resolve: RefResolver, depth = 0): fc.Arbitrary<unknown> {
  if (!schema || depth > 8) return hostileScalar;
  if (typeof schema.$ref === 'string') return fromSchema(resolve(schema.$ref), resolve, depth + 1);
  const alternatives = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
  if (alternatives) return fc.oneof(...alternatives.map((alternative) => fromSchema({ ...alternative }, resolve, depth + 1)));
  if ('const' in schema) return fc.constant(schema.const);
  if (Array.isArray(schema.enum)) return fc.constantFrom(...(schema.enum as unknown[]));
  if (Array.isArray(schema.type)) return fc.oneof(...(schema.type as string[]).map((type) => fromSchema({ ...schema, type }, resolve, depth)));
  switch (schema.type) {
    case 'string':
      return stringArbitrary(schema);
    case 'integer':
    case 'number':
      return numberArbitrary(schema);
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'array': {
      const minLength = typeof schema.minItems === 'number' ? schema.minItems : 0;
      const maxItems = typeof schema.maxItems === 'number' ? schema.maxItems : 4;
      return fc.array(fromSchema(schema.items as JsonSchema, resolve, depth + 1), { minLength, maxLength: Math.min(Math.max(minLength, 3), maxItems) });
    }
    case 'object':
      return objectArbitrary(schema, resolve, depth);
    default:
      // `{}` (any JSON), e.g. z.json() at the top of a field.
      return hostileJson(3);
  }
}

function objectArbitrary(schema: JsonSchema, resolve: RefResolver, depth: number): fc.Arbitrary<unknown> {
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const required = new Set((schema.required ?? []) as string[]);
  const names = Object.keys(properties);
  const fixed =
    names.length === 0
      ? fc.constant({})
      : fc.record(Object.fromEntries(names.map((name) => [name, fromSchema(properties[name], resolve, depth + 1)])), {
          requiredKeys: names.filter((name) => required.has(name)),
        });
  const extra = schema.additionalProperties;
  if (!extra || typeof extra !== 'object') return fixed;
  // A record (string → value): keys may be hostile too.
  const entries = fc.dictionary(hostileKey, fromSchema(extra as JsonSchema, resolve, depth + 1), { maxKeys: 4, noNullPrototype: true });
  return fc.tuple(fixed, entries).map(([known, more]) => ({ ...more, ...(known as object) }));
}

/**
 * `value` with NUL and unpaired surrogates replaced: such text is refused before validation, so a
 * value meant to get past validation must not carry it.
 */
export function storable(value: unknown): unknown {
  if (typeof value === 'string') return value.replaceAll('\u0000', '0').replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '?');
  if (Array.isArray(value)) return value.map(storable);
  if (value !== null && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([key, child]) => [storable(key), storable(child)]));
  return value;
}

// ---------------------------------------------------------------------------------------------
// Mutations of valid-ish values: wrong types, unknown fields, missing fields

type Path = (string | number)[];

function pathsOf(value: unknown, prefix: Path = [], out: Path[] = []): Path[] {
  out.push(prefix);
  if (value !== null && typeof value === 'object' && out.length < 200) {
    for (const [key, child] of Object.entries(value)) pathsOf(child, [...prefix, Array.isArray(value) ? Number(key) : key], out);
  }
  return out;
}

function replaceAt(value: unknown, path: Path, replace: (old: unknown) => unknown): unknown {
  if (path.length === 0) return replace(value);
  const [head, ...rest] = path;
  if (Array.isArray(value)) return value.map((item, index) => (index === head ? replaceAt(item, rest, replace) : item));
  const copy = { ...(value as Record<string, unknown>) };
  copy[head as string] = replaceAt(copy[head as string], rest, replace);
  return copy;
}

const wrongTypeValue = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, '', '1', [], {}, [1, 2], { a: 1 }, '2020-13-45T25:61:61Z'),
  hostileJson(2),
);

/** Text PostgreSQL cannot store or that is not Unicode, to slip into an otherwise valid value. */
export const POISON = ['\u0000', 'a\u0000', '\ud800', 'x\udfff', '\ud83d'] as const;

/**
 * One mutation of `base`: a field of the wrong type, an unknown field, a field removed, a wrong
 * top-level type, or one string (value or key) poisoned with text that cannot be stored.
 */
export function mutated(base: fc.Arbitrary<unknown>): fc.Arbitrary<{ mutation: string; value: unknown }> {
  return fc
    .record({
      value: base,
      at: fc.nat(),
      kind: fc.constantFrom('wrong-type', 'unknown-field', 'remove', 'top-level', 'poison', 'poison', 'poison-key'),
      replacement: wrongTypeValue,
      key: hostileKey,
      poison: fc.constantFrom(...POISON),
    })
    .map(({ value, at, kind, replacement, key, poison }) => {
      const paths = pathsOf(value);
      const path = paths[at % paths.length]!;
      switch (kind) {
        case 'poison': {
          const strings = paths.filter((p) => typeof getAt(value, p) === 'string');
          const target = strings[at % Math.max(strings.length, 1)];
          if (!target) return { mutation: 'poisoned nothing (no string)', value };
          return { mutation: `poisoned text at ${target.join('.')}`, value: replaceAt(value, target, (old) => `${String(old)}${poison}`) };
        }
        case 'poison-key': {
          const objects = paths.filter((p) => isPlainObject(getAt(value, p)));
          const target = objects[at % Math.max(objects.length, 1)] ?? [];
          return {
            mutation: `poisoned key at ${target.join('.')}`,
            value: replaceAt(value, target, (old) => (isPlainObject(old) ? { ...old, [`k${poison}`]: 1 } : old)),
          };
        }
        case 'wrong-type':
          return { mutation: `wrong type at ${path.join('.')}`, value: replaceAt(value, path, () => replacement) };
        case 'unknown-field': {
          const objects = paths.filter((p) => isPlainObject(getAt(value, p)));
          const target = objects[at % Math.max(objects.length, 1)] ?? [];
          return {
            mutation: `unknown field ${JSON.stringify(key)} at ${target.join('.')}`,
            value: replaceAt(value, target, (old) => (isPlainObject(old) ? { ...old, [`${key}~unknown`]: replacement } : old)),
          };
        }
        case 'remove': {
          if (path.length === 0) return { mutation: 'removed everything', value: {} };
          const parentPath = path.slice(0, -1);
          const last = path.at(-1)!;
          return {
            mutation: `removed ${path.join('.')}`,
            value: replaceAt(value, parentPath, (parent) =>
              Array.isArray(parent) ? parent.filter((_, index) => index !== last) : Object.fromEntries(Object.entries(parent as object).filter(([k]) => k !== last)),
            ),
          };
        }
        default:
          return { mutation: 'wrong top-level type', value: replacement };
      }
    });
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function getAt(value: unknown, path: Path): unknown {
  return path.reduce<unknown>((node, key) => (node as Record<string | number, unknown> | undefined)?.[key], value);
}

// ---------------------------------------------------------------------------------------------
// Path ids and query strings

/** Characters a URL path segment may carry unencoded (RFC 3986 pchar without %). */
const PCHAR = /^[A-Za-z0-9._~!$&'()*+,;=:@-]{1,40}$/;

/** A path segment as it goes on the wire: long, unicode (percent-encoded), dots, slashes, bad escapes. */
export const hostilePathSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: hostileString(60).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, '\ufffd').slice(0, 5_000) || '-')) },
  { weight: 2, arbitrary: fc.stringMatching(PCHAR) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '.',
      '..',
      '%2e%2e',
      '%2E',
      '%2F',
      'a%2Fb',
      'a/b',
      '%00',
      'a%00b',
      '%zz',
      '%E0%A4%A',
      '%C0%80',
      '%ED%A0%80',
      '%FF',
      ';',
      'a;b=c',
      '%20',
      '+',
      '%2B',
      '~',
      'space-00000000-0000-4000-8000-000000000000',
      'sub-00000000-0000-4000-8000-000000000000',
      `AKID${'A'.repeat(32)}`,
    ),
  },
  { weight: 1, arbitrary: fc.integer({ min: 129, max: 3_000 }).map((length) => 'a'.repeat(length)) },
);

/** A query parameter of an OpenAPI operation. */
export interface QueryParameter {
  name: string;
  schema: JsonSchema;
}

/** Serializes name/value pairs; `raw` keeps characters unencoded where a URL allows them. */
export function toQueryString(pairs: [string, string][], raw = false): string {
  if (pairs.length === 0) return '';
  const encode = raw ? (s: string) => s.replace(/[^A-Za-z0-9._~!$'()*+,;:@%=/?[\]-]/g, encodeURIComponent) : encodeURIComponent;
  return `?${pairs.map(([name, value]) => `${encode(name)}=${encode(value)}`).join('&')}`;
}

const wellFormed = (s: string) => s.replace(/[\ud800-\udfff]/g, '\ufffd');

/** Valid-ish values for the declared query parameters, as strings (arrays become repeated keys). */
export function validishQuery(parameters: QueryParameter[], resolve: RefResolver): fc.Arbitrary<[string, string][]> {
  if (parameters.length === 0) return fc.constant([]);
  const record = fc.record(Object.fromEntries(parameters.map((p) => [p.name, fromSchema(p.schema, resolve)])), { requiredKeys: [] });
  return record.map((values) =>
    Object.entries(values).flatMap(([name, value]) =>
      (Array.isArray(value) ? value : [value]).map((item): [string, string] => [name, wellFormed(typeof item === 'string' ? item : JSON.stringify(item) ?? '')]),
    ),
  );
}

const PAGE_SIZES = ['0', '-1', '101', '201', '1001', '1000000', '99999999999999999999', '1e3', '1.5', '0x10', ' 5', '5 ', '', 'NaN', 'Infinity', '-0', '00010'] as const;

/** Query strings that are not what a route takes: wrong values, unknown and repeated keys, too many filters, garbage. */
export function hostileQuery(parameters: QueryParameter[]): fc.Arbitrary<string> {
  const names = parameters.map((p) => p.name);
  const knownName = names.length > 0 ? fc.constantFrom(...names) : fc.constant('pageSize');
  const name = fc.oneof({ weight: 4, arbitrary: knownName }, { weight: 1, arbitrary: hostileKey.map(wellFormed) }, { weight: 1, arbitrary: fc.constantFrom('__proto__', 'constructor', 'a[b]', 'x.y') });
  const value = fc.oneof(hostileString(40).map((s) => wellFormed(s.slice(0, 20_000))), fc.constantFrom(...PAGE_SIZES));
  const pairs = fc.array(fc.tuple(name, value), { maxLength: 8 });
  const tooManyFilters = fc
    .record({ name: fc.constantFrom('metadata', 'userId', 'sessionId', ...names), count: fc.integer({ min: 11, max: 400 }) })
    .map(({ name: key, count }) => Array.from({ length: count }, (_, i): [string, string] => [key, key === 'metadata' ? `k${i % 12}=v${i}` : `v${i}`]));
  const oversizePage = fc.constantFrom(...PAGE_SIZES).map((size): [string, string][] => [['pageSize', size]]);
  // Every declared parameter, one at a time, carrying text that cannot be stored.
  // (A URL cannot carry a lone surrogate, so NUL is the poison here.)
  const textNames = parameters.filter((p) => p.schema.type === 'string' || p.schema.type === 'array').map((p) => p.name);
  const poisoned = fc
    .constantFrom(...(textNames.length > 0 ? textNames : ['pageToken']))
    .chain((key) => fc.constantFrom<[string, string][]>([[key, '\u0000']], [[key, 'a\u0000b']], [[key, key === 'metadata' ? 'k=v\u0000' : 'x\u0000']]));
  return fc.oneof(
    { weight: 4, arbitrary: fc.tuple(pairs, fc.boolean()).map(([p, raw]) => toQueryString(p, raw)) },
    { weight: 2, arbitrary: tooManyFilters.map((p) => toQueryString(p)) },
    { weight: 2, arbitrary: oversizePage.map((p) => toQueryString(p)) },
    { weight: 3, arbitrary: poisoned.map((p) => toQueryString(p)) },
    { weight: 1, arbitrary: fc.constantFrom('?', '?&&&', '?=', '?==x', '?pageSize', '?pageSize=1&pageSize=2', '?%', '?%zz=1', '?a=%E0%A4%A', '?pageToken=', '?includeTotal=TRUE', '?order=ASC') },
  );
}
