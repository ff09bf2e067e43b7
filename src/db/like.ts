/**
 * `value` as a LIKE pattern matching it anywhere, with its own %, _ and \ taken literally
 * (backslash is PostgreSQL's default LIKE escape character).
 */
export function containsPattern(value: string): string {
  return `%${value.replace(/[\\%_]/g, '\\$&')}%`;
}
