// If-Match handling (docs/design.md §4.4): the ETag of a session is its revision, `"<revision>"`.
import { AppError, invalidParameter } from '../errors.js';

/** A parsed If-Match: the revisions it names, `*` (the resource must exist), or no header. */
export type IfMatch = number[] | '*' | undefined;

export const etagOf = (revision: number): string => `"${revision}"`;

/** Accepts `"7"`, `W/"7"`, `7` or `*`. A list of several tags is accepted if every one parses. */
export function parseIfMatch(header: string | string[] | undefined): IfMatch {
  if (header === undefined) return undefined;
  const text = Array.isArray(header) ? header.join(',') : header;
  if (text.trim() === '*') return '*';
  const revisions = text.split(',').map((tag) => {
    const match = /^\s*(?:W\/)?(?:"(\d{1,15})"|(\d{1,15}))\s*$/.exec(tag);
    if (!match) throw invalidParameter('If-Match', 'must be an ETag as returned by the API, e.g. "3", or *');
    return Number(match[1] ?? match[2]);
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
