// Text and numbers a JSON value may hold that PostgreSQL cannot store or JSON cannot write (the
// rules are listed in src/http/request-text.ts, which applies them to every request): shared by the
// request checks and by the values that arrive inside a string (the API 3.0 face's JSON strings).

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

/** The keys from the root to `node`. */
function pathOf(node: Node): (string | number)[] {
  const keys: (string | number)[] = [];
  for (let at: Node | undefined = node; at?.key !== undefined; at = at.parent) keys.unshift(at.key);
  return keys;
}

const NOT_A_JSON_NUMBER = 'must be a finite number: JSON has no NaN or Infinity';

/** Where in a value something cannot be taken (the keys from its root; [] for the value itself), and why. */
export interface UnstorableAt {
  path: (string | number)[];
  rule: string;
}

/**
 * The first string (value or object key) or number in `value` that cannot be taken. Iterative,
 * like the nesting check, so a deep value cannot overflow the stack.
 */
export function findUnstorable(value: unknown): UnstorableAt | undefined {
  const pending: Node[] = [{ value, parent: undefined, key: undefined }];
  while (pending.length > 0) {
    const node = pending.pop()!;
    const item = node.value;
    if (typeof item === 'string') {
      const why = unstorableText(item);
      if (why) return { path: pathOf(node), rule: why };
      continue;
    }
    if (typeof item === 'number') {
      if (!Number.isFinite(item)) return { path: pathOf(node), rule: NOT_A_JSON_NUMBER };
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
      if (why) return { path: pathOf(node), rule: `has a key that ${why.replace(/^must not contain/, 'contains')}` };
      pending.push({ value: child, parent: node, key });
    }
  }
  return undefined;
}
