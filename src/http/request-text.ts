// Text that is not Unicode, or that PostgreSQL cannot store, is refused at the door with a 400
// naming the field, instead of failing deep inside a query as a 500 (found by the property tests):
// - a JSON body must be UTF-8 (RFC 8259 §8.1); Node's decoder would silently turn bad bytes
//   into U+FFFD and store something the client never sent;
// - U+0000 (NUL) cannot be stored in a PostgreSQL text or jsonb value;
// - an unpaired UTF-16 surrogate (`"\ud800"` in JSON) is not a character: jsonb refuses the
//   escape, and a text column would silently get U+FFFD.
// - an integer written with more digits than a double holds (lib/inexact-integer.ts,
//   inexactIntegerRule): JSON.parse turns 12345678901234567890123 into 1.2345678901234568e+22,
//   and jsonb would store that without a word. Only the raw text still has the digits, so the check
//   reads it. An integer beyond ±(2^53−1) that a double spells out in full (1e20 as
//   100000000000000000000, which PostgreSQL writes back) is stored as written, and is taken.
//   A number written with a fraction or an exponent (`1e21`, `0.1`) is a floating-point value by
//   its own spelling and is taken as the nearest double.
// - NaN and ±Infinity: a JSON number literal beyond a double's range (`1e400`, `-2E+308`, 310
//   digits and a fraction) comes out of JSON.parse as ±Infinity, and a YAML body can write them
//   (`.inf`, `.nan`). jsonb has no such numbers, and JSON.stringify would store them as null.
//   JSON values are not checked by their schemas (http/schemas.ts, JsonValue), so this is what
//   refuses them, on every body.
import type { IncomingHttpHeaders } from 'node:http';
import { type FastifyInstance, type FastifyRequest, errorCodes } from 'fastify';
import { AppError, invalidParameter } from '../errors.js';
import { findInexactIntegerLiteral } from '../lib/inexact-integer.js';
import { jsonPathName } from '../lib/json-path.js';
import { holdsNonFiniteNumber } from '../lib/json-measure.js';
import { findUnstorable } from '../lib/unstorable-text.js';
import { hasPrototypeKey, mayHaveBeenReadWrong, readJson, writesKeyWithBackslash } from '../lib/parse-json.js';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** findUnstorable as a 400 naming the field (`events[0].author`; `root` for the value itself). */
export function findUnstorableText(value: unknown, root: string): AppError | undefined {
  const found = findUnstorable(value);
  return found && invalidParameter(jsonPathName(found.path) || root, found.rule);
}

const CHARSET_PARAMETER = /;\s*charset\s*=\s*(?:"([^"]*)"|([^;\s]*))/i;

/**
 * A body declared in another charset than UTF-8 (`charset=utf-16`, `latin1`…) as a 415: the
 * service reads bodies as UTF-8 only, and reading one in another charset as UTF-8 would store
 * something the client never sent. The charset parameter's name and value are case-insensitive
 * (RFC 9110 §8.3.2), quoted or not; without one, UTF-8 is meant.
 */
export function unsupportedCharset(contentType: string | undefined): AppError | undefined {
  const match = contentType === undefined ? null : CHARSET_PARAMETER.exec(contentType);
  if (!match) return undefined;
  const charset = match[1] ?? match[2] ?? '';
  if (charset.toLowerCase() === 'utf-8') return undefined;
  return new AppError('UnsupportedMediaType', `The body's charset ${JSON.stringify(charset)} is not supported: send UTF-8 (charset=utf-8, or no charset).`, {
    details: { issues: [{ field: 'content-type', message: `charset ${JSON.stringify(charset)} is not supported; only utf-8` }] },
  });
}

const NO_CONTENT_CODING = 'request bodies must not be encoded: send them uncompressed (Content-Encoding: identity or none)';

/**
 * A body sent with a content coding (`Content-Encoding: gzip`, `br`, `gzip, identity`…) as a 415
 * (RFC 9110 §8.4): the service decodes none, and reading compressed bytes as JSON would answer a
 * misleading 400, or store them as if plain when they happen to parse. Codings are
 * case-insensitive; `identity` is no coding. A request without a body (Fastify's own test: no
 * Transfer-Encoding, Content-Length absent or 0) has nothing encoded.
 */
export function unsupportedContentEncoding(headers: IncomingHttpHeaders): AppError | undefined {
  const declared = headers['content-encoding'];
  if (declared === undefined) return undefined;
  if (headers['transfer-encoding'] === undefined && (headers['content-length'] === undefined || headers['content-length'] === '0')) return undefined;
  const codings = (Array.isArray(declared) ? declared.join(',') : declared).split(',').map((coding) => coding.trim().toLowerCase());
  const coding = codings.find((name) => name !== '' && name !== 'identity');
  if (coding === undefined) return undefined;
  return new AppError('UnsupportedMediaType', `The body's content coding ${JSON.stringify(coding)} is not supported: send the body uncompressed (Content-Encoding: identity, or none).`, {
    // RFC 9110 §12.5.3: the answer names the codings taken, so a client can tell this 415 from a media type's.
    headers: { 'accept-encoding': 'identity' },
    details: { issues: [{ field: 'content-encoding', message: NO_CONTENT_CODING }] },
  });
}

/**
 * The first integer literal of a valid JSON text that a double does not hold as written
 * (lib/inexact-integer.ts), as a 400 naming its field (`events[1].actions.stateDelta.big`).
 */
export function findInexactInteger(text: string, root = 'body'): AppError | undefined {
  const found = findInexactIntegerLiteral(text);
  return found && invalidParameter(jsonPathName(found.path) || root, found.rule);
}

/**
 * Parsed bodies whose JSON text has no `\u` escape, so no string or key in them can hold what
 * unstorableText refuses: in valid JSON a NUL can only be written as an escape (a raw control
 * character is a syntax error), and so can a lone surrogate (the strict decoder refuses one encoded
 * in the bytes). The walk of such a body finds no text to refuse, so it is skipped (every append
 * paid for it otherwise, issue 24) but for a lighter look for numbers beyond a double.
 * Weak: a body is forgotten with its request.
 */
const bodiesWithoutEscapes = new WeakSet<object>();

type ParseDone = (error: Error | null, value?: unknown) => void;

/**
 * Fastify's own JSON body parser (prototype poisoning refused, its empty and invalid JSON errors),
 * guarded against V8's JSON.parse key bug as lib/parse-json.ts's parseJson is: a text that could
 * teach JSON.parse a wrong key is read by readJson instead, with the same refusals.
 */
export function guardedJsonBodyParser(scope: FastifyInstance): (request: FastifyRequest, text: string, done: ParseDone) => void {
  const fastifyParser = scope.getDefaultJsonParser('error', 'error');
  return (request, text, done) => {
    if (!writesKeyWithBackslash(text)) {
      fastifyParser(request, text, (error: Error | null, value?: unknown) => {
        if (error || !mayHaveBeenReadWrong(text, value)) done(error, value);
        else readGuarded(text, done);
      });
      return;
    }
    readGuarded(text, done);
  };
}

function readGuarded(text: string, done: ParseDone): void {
  let value: unknown;
  try {
    value = readJson(text);
  } catch {
    done(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(), undefined);
    return;
  }
  if (hasPrototypeKey(value)) done(new errorCodes.FST_ERR_CTP_INVALID_JSON_BODY(), undefined);
  else done(null, value);
}

/**
 * What a parsed body holds that cannot be taken, as findUnstorableText names it. A body known to
 * hold no escape (bodiesWithoutEscapes) can only hold a number beyond a double: the full walk,
 * which names the field, runs for it only when a lighter one finds such a number.
 */
function findUnstorableBodyValue(body: unknown): AppError | undefined {
  if (!bodiesWithoutEscapes.has(body as object) || holdsNonFiniteNumber(body)) return findUnstorableText(body, 'body');
  return undefined;
}

/**
 * A strict UTF-8 JSON body parser, and the check of body, query and path parameters before validation.
 * The refusal of encoded bodies is a hook of the root, so it runs before every parser, the API 3.0
 * endpoint's and the YAML import's included, and before anything is read or written.
 */
export function registerRequestTextRules(app: FastifyInstance): void {
  app.addHook('preParsing', (request, _reply, payload, done) => {
    const encodingError = unsupportedContentEncoding(request.headers);
    if (encodingError) done(encodingError);
    else done(null, payload);
  });
  // Fed only bodies that are valid UTF-8.
  const parseJson = guardedJsonBodyParser(app);
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    const charsetError = unsupportedCharset(request.headers['content-type']);
    if (charsetError) {
      done(charsetError, undefined);
      return;
    }
    let text: string;
    try {
      text = strictUtf8.decode(body as Buffer);
    } catch {
      done(
        new AppError('InvalidParameter', 'The body is not valid UTF-8: JSON must be sent as UTF-8.', {
          details: { issues: [{ field: 'body', message: 'must be valid UTF-8' }] },
        }),
        undefined,
      );
      return;
    }
    parseJson(request, text, (error: Error | null, value?: unknown) => {
      if (error) return done(error, undefined);
      if (value !== null && typeof value === 'object' && !text.includes('\\u')) bodiesWithoutEscapes.add(value);
      done(findInexactInteger(text) ?? null, value);
    });
  });

  // Only the parts a route declares: a query string or body it ignores is not its input. A callback
  // hook, not an async one: no promise per request (request-logging.ts).
  app.addHook('preValidation', (request, _reply, done) => {
    const schema = request.routeOptions.schema;
    const problem =
      findUnstorableText(request.params, 'path') ??
      (schema?.querystring ? findUnstorableText(request.query, 'query') : undefined) ??
      (schema?.body && request.body !== undefined ? findUnstorableBodyValue(request.body) : undefined);
    done(problem);
  });
}
