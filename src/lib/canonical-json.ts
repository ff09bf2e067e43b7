// JSON with object keys sorted at every level: equal values always give equal text, whatever the
// key order a client happened to send.
import { createHash } from 'node:crypto';

export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, item: unknown) => {
    if (item === null || typeof item !== 'object' || Array.isArray(item)) return item;
    const sorted: Record<string, unknown> = {};
    for (const key of Object.keys(item).sort()) sorted[key] = (item as Record<string, unknown>)[key];
    return sorted;
  });
}

export function sha256(text: string): Buffer {
  return createHash('sha256').update(text).digest();
}
