// Text that is not Unicode, or that PostgreSQL cannot store, is refused at the door with a 400
// naming the field, instead of failing deep inside a query as a 500 (found by the property tests):
// - a JSON body must be UTF-8 (RFC 8259 §8.1); Node's decoder would silently turn bad bytes
//   into U+FFFD and store something the client never sent;
// - U+0000 (NUL) cannot be stored in a PostgreSQL text or jsonb value;
// - an unpaired UTF-16 surrogate (`"\ud800"` in JSON) is not a character: jsonb refuses the
//   escape, and a text column would silently get U+FFFD.
import type { FastifyInstance } from 'fastify';
import { AppError, invalidParameter } from '../errors.js';

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** Why `text` cannot be taken, or undefined when it can. */
export function unstorableText(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain U+0000 (NUL): it cannot be stored';
  if (LONE_SURROGATE.test(text)) return 'must not contain an unpaired UTF-16 surrogate (\\uD800–\\uDFFF): it is not a Unicode character';
  return undefined;
}

interface Node {
  value: unknown;
  parent: Node | undefined;
  key: string | number | undefined;
}

/** `events[0].author` style, as validation errors name fields; `root` for the value itself. */
function fieldOf(node: Node, root: string): string {
  const keys: (string | number)[] = [];
  for (let at: Node | undefined = node; at?.key !== undefined; at = at.parent) keys.unshift(at.key);
  let name = '';
  for (const key of keys) name += typeof key === 'number' ? `[${key}]` : name ? `.${key}` : key;
  return name || root;
}

/**
 * The first string (value or object key) in `value` that cannot be taken, as a 400 naming it.
 * Iterative, like the nesting check, so a deep value cannot overflow the stack.
 */
export function findUnstorableText(value: unknown, root: string): AppError | undefined {
  const pending: Node[] = [{ value, parent: undefined, key: undefined }];
  while (pending.length > 0) {
    const node = pending.pop()!;
    const item = node.value;
    if (typeof item === 'string') {
      const why = unstorableText(item);
      if (why) return invalidParameter(fieldOf(node, root), why);
      continue;
    }
    if (item === null || typeof item !== 'object') continue;
    if (Array.isArray(item)) {
      for (let index = item.length - 1; index >= 0; index--) pending.push({ value: item[index], parent: node, key: index });
      continue;
    }
    for (const [key, child] of Object.entries(item)) {
      const why = unstorableText(key);
      // The key itself cannot be shown safely; the object holding it is named instead.
      if (why) return invalidParameter(fieldOf(node, root), `has a key that ${why.replace(/^must not contain/, 'contains')}`);
      pending.push({ value: child, parent: node, key });
    }
  }
  return undefined;
}

/** A strict UTF-8 JSON body parser, and the check of body, query and path parameters before validation. */
export function registerRequestTextRules(app: FastifyInstance): void {
  // Fastify's own parser (prototype poisoning refused, its empty/invalid JSON errors), fed only
  // bodies that are valid UTF-8.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
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
    parseJson(request, text, done);
  });

  // Only the parts a route declares: a query string or body it ignores is not its input.
  app.addHook('preValidation', async (request) => {
    const schema = request.routeOptions.schema;
    const problem =
      findUnstorableText(request.params, 'path') ??
      (schema?.querystring ? findUnstorableText(request.query, 'query') : undefined) ??
      (schema?.body && request.body !== undefined ? findUnstorableText(request.body, 'body') : undefined);
    if (problem) throw problem;
  });
}
