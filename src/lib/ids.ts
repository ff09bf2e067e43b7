// Server-generated identifiers.
import { randomBytes, randomUUID } from 'node:crypto';

/** RFC 9562 UUIDv7: time-ordered, so generated session and event ids sort by creation. */
export function uuidv7(): string {
  const bytes = randomBytes(16);
  const millis = BigInt(Date.now());
  for (let i = 0; i < 6; i++) bytes[i] = Number((millis >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export const newAccountId = (): string => `acct-${randomUUID()}`;
export const newSpaceId = (): string => `space-${randomUUID()}`;
export const newSessionId = (): string => uuidv7();
export const newEventId = (): string => uuidv7();
