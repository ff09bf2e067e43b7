// Writing an export document as JSON or YAML text, piece by piece, and reading a YAML document
// safely. Pure apart from consuming the given event chunks: no database, no HTTP.
import { Lexer, Parser, parseDocument, stringify } from 'yaml';
import { acceptedMediaRanges } from '../../lib/media-ranges.js';
import { findPrototypeKey } from '../../lib/parse-json.js';
import type { EventView } from '../events/index.js';
import type { SessionExport } from './transfer.service.js';
import { jsonValueOfYaml } from './yaml-json.js';

export type ExportFormat = 'json' | 'yaml';

export const CONTENT_TYPES = { json: 'application/json; charset=utf-8', yaml: 'application/yaml; charset=utf-8' } as const;
export const YAML_MEDIA_TYPES = ['application/yaml', 'text/yaml', 'application/x-yaml'] as const;

// Anchors are never written: every event would otherwise be compared with every other.
const YAML_WRITE = { aliasDuplicateObjects: false, lineWidth: 0 } as const;

/**
 * `?format=` wins; else the Accept type with the highest q among JSON and YAML (the first listed on
 * a tie); anything else, `*\/*` or no Accept at all answers JSON.
 */
export function chooseExportFormat(queryFormat: ExportFormat | undefined, accept: string | undefined): ExportFormat {
  if (queryFormat) return queryFormat;
  let best: { format: ExportFormat; q: number } | undefined;
  for (const { range, q } of acceptedMediaRanges(accept)) {
    const format: ExportFormat | undefined = range === 'application/json' ? 'json' : (YAML_MEDIA_TYPES as readonly string[]).includes(range) ? 'yaml' : undefined;
    if (format && (!best || q > best.q)) best = { format, q };
  }
  return best?.format ?? 'json';
}

/**
 * The document's text in pieces: the header, then each chunk of events. Parsing the joined
 * pieces gives `{ format, session, events }` in either format.
 */
export async function* exportText(doc: SessionExport, format: ExportFormat): AsyncGenerator<string> {
  const header = { format: doc.format, session: doc.session };
  if (format === 'json') {
    yield `${JSON.stringify(header).slice(0, -1)},"events":[`;
    let first = true;
    for await (const chunk of doc.eventChunks()) {
      if (chunk.length === 0) continue;
      yield `${first ? '' : ','}${chunk.map((event) => JSON.stringify(event)).join(',')}`;
      first = false;
    }
    yield ']}\n';
    return;
  }
  yield stringify(header, YAML_WRITE);
  let any = false;
  for await (const chunk of doc.eventChunks()) {
    if (chunk.length === 0) continue;
    // A block sequence at the key's own indentation is valid YAML for the value of `events:`.
    yield `${any ? '' : 'events:\n'}${stringify(chunk satisfies EventView[], YAML_WRITE)}`;
    any = true;
  }
  if (!any) yield 'events: []\n';
}

/** Few aliases at most: an alias bomb is refused before it expands. */
export const YAML_MAX_ALIASES = 50;

/**
 * Parses one YAML document with the YAML 1.2 core schema, refusing duplicate keys, alias expansion
 * beyond YAML_MAX_ALIASES, collections nested deeper than `maxNesting` (the import's limit),
 * tags the schema does not know, and what JSON cannot hold (yaml-json.ts: a YamlValueError naming
 * the field). Answers the document's JSON value. Throws the yaml package's error on bad input.
 */
export function parseYamlDocument(text: string, maxNesting: number): unknown {
  if (nestedDeeperThan(text, maxNesting)) throw new Error(`it is nested deeper than ${maxNesting} levels`);
  // Integers as BigInt and (below) maps as Map: what a double or a plain object would lose, the walk sees.
  const document = parseDocument(text, { schema: 'core', uniqueKeys: true, merge: false, prettyErrors: false, intAsBigInt: true });
  if (document.errors.length > 0) throw document.errors[0]!;
  // A tag the core schema does not know leaves its value a string (`!!int 1e400` is the text
  // "1e400"), which is not what the sender meant; the package would only print a warning to stderr.
  const unknownTag = document.warnings.find((warning) => warning.code === 'TAG_RESOLVE_FAILED');
  if (unknownTag) throw new Error(`${unknownTag.message.split('\n')[0]}: write the value without the tag`);
  const value = jsonValueOfYaml(document.toJS({ maxAliasCount: YAML_MAX_ALIASES, mapAsMap: true }));
  assertNoPrototypeKeys(value);
  return value;
}

/**
 * Whether the YAML text nests collections deeper than `limit`, read from its tokens before it is
 * composed. The yaml package composes recursively: a document of 1,000 levels overflows the stack.
 * The server caught that as an exception (a 400, "Maximum call stack size exceeded"), but the same
 * parse of 20,000 levels (`a: [[[…]]]`, 40 kB) in a fresh process died with a fatal error (V8 could
 * not compile a regular expression at the stack's limit), so the stack's end is not a limit to lean
 * on. The lexer and parser are iterative, and the parser's stack holds the collections being read
 * (below): a hostile text is refused after `limit` tokens. A valid document pays one more pass
 * (300 kB, 1,000 events: 70–80 ms more than the 120 ms parse).
 */
function nestedDeeperThan(text: string, limit: number): boolean {
  const parser = new Parser();
  for (const token of new Lexer().lex(text)) {
    for (const _document of parser.next(token)) {
      // The concrete syntax tree is not kept: parseDocument() reads the text again.
    }
    // The stack holds the document, the collections and, in block style, the scalar being read:
    // only a stack that deep is looked into, so a shallow document pays for its length alone.
    if (parser.stack.length > limit + 1 && collectionsOn(parser.stack) > limit) return true;
  }
  return false;
}

const collectionsOn = (stack: readonly { type: string }[]): number => stack.filter((item) => COLLECTION_TOKENS.has(item.type)).length;
const COLLECTION_TOKENS = new Set(['block-map', 'block-seq', 'flow-collection']);

/** The JSON body parser refuses `__proto__` and `constructor.prototype`; YAML bodies get the same rule. */
function assertNoPrototypeKeys(value: unknown): void {
  const key = findPrototypeKey(value);
  if (key !== undefined) throw new Error(`the key "${key}" is not allowed`);
}
