// If-Match handling (docs/design.md §4.4): the ETag of a session is its revision, `"<revision>"`.
import { AppError, invalidParameter } from '../errors.js';

/** A parsed If-Match: the revisions it names, `*` (the resource must exist), or no header. */
export type IfMatch = number[] | '*' | undefined;

export const etagOf = (revision: number): string => `"${revision}"`;

/** What a well-formed tag the API never issues (`"01"`) stands for: revisions start at 1. */
const NO_REVISION = -1;

/** Accepts `"7"`, `W/"7"`, `7` or `*`. A list of several tags is accepted if every one parses. */
export function parseIfMatch(header: string | string[] | undefined): IfMatch {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header;
  if (text.trim() === '*') return '*';
  const revisions = text.split(',').map((tag) => {
    const match = /^\s*(?:W\/)?(?:"(\d{1,15})"|(\d{1,15}))\s*$/.exec(tag);
    if (!match) throw invalidParameter('If-Match', 'must be an ETag as returned by the API, e.g. "3", or *');
    const digits = match[1] ?? match[2]!;
    // Tags compare as strings (RFC 9110 §8.8.3.2): "01" is not the "1" the API issued, so it matches no revision.
    return /^0\d/.test(digits) ? NO_REVISION : Number(digits);
  });
  return revisions;
}

/** Throws 412 with the current revision when the caller's If-Match does not name it. */
export function assertIfMatch(ifMatch: IfMatch, currentRevision: number): void {
  if (ifMatch === undefined || ifMatch === '*' || ifMatch.includes(currentRevision)) return;
  throw preconditionFailed(currentRevision);
}

/** The 412 of a failed If-Match, with the current revision (and its ETag) for the caller to retry from. */
export function preconditionFailed(currentRevision: number): AppError {
  return new AppError('FailedOperation.PreconditionFailed', `If-Match does not match the current revision ${currentRevision}.`, {
    details: { currentRevision },
    headers: { etag: etagOf(currentRevision) },
  });
}
