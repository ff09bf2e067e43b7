// JSON objects handled as text, without parsing their values: what an answer that carries a
// megabyte of state needs to know of it is its top-level keys, and parsing the megabyte into
// objects to write it out again costs milliseconds of the event loop and as much garbage
// (bench:neighbours attack 5). The texts are valid JSON objects (PostgreSQL's output of jsonb):
// nothing here checks that they are.
import { parseJson } from './parse-json.js';

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COMMA = 0x2c;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;

/**
 * Whether `test` holds for every top-level key of `objectText`, stopping at the first that fails.
 * Strings are skipped from quote to quote (indexOf), so the walk costs what the text's structure
 * does, not its length: a state of a few long strings is a few steps.
 */
export function everyTopLevelKey(objectText: string, test: (key: string) => boolean): boolean {
  let depth = 0;
  let keyNext = false;
  for (let at = 0; at < objectText.length; at++) {
    const char = objectText.charCodeAt(at);
    if (char === QUOTE) {
      const end = closingQuote(objectText, at);
      if (keyNext) {
        const written = objectText.slice(at + 1, end);
        // A key with an escape is decoded; any other is its text between the quotes.
        const key = written.includes('\\') ? (parseJson(objectText.slice(at, end + 1)) as string) : written;
        if (!test(key)) return false;
        keyNext = false;
      }
      at = end;
    } else if (char === OPEN_BRACE || char === OPEN_BRACKET) {
      depth++;
      // Only the outer object's members start with a key.
      keyNext = depth === 1;
    } else if (char === CLOSE_BRACE || char === CLOSE_BRACKET) {
      depth--;
    } else if (char === COMMA && depth === 1) {
      keyNext = true;
    }
  }
  return true;
}

/** The index of the quote that closes the string opened at `open` (the text's end if none does). */
function closingQuote(text: string, open: number): number {
  for (let at = text.indexOf('"', open + 1); at >= 0; at = text.indexOf('"', at + 1)) {
    let backslashes = 0;
    while (text.charCodeAt(at - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return at;
  }
  return text.length;
}

/**
 * One object of the members of `objectTexts`, in their order, as text. The objects' keys must be
 * disjoint (a key twice would be two members of one JSON object).
 */
export function joinJsonObjects(objectTexts: string[]): string {
  const members: string[] = [];
  for (const text of objectTexts) {
    const inner = text.slice(text.indexOf('{') + 1, text.lastIndexOf('}'));
    if (inner.trim() !== '') members.push(inner);
  }
  return `{${members.join(',')}}`;
}
