// What sign-in says, in terms of the credential the person pasted. The service's own messages
// speak to API clients about the Authorization header, which nobody typed here.
import type { Failure } from './api.js';

// The shape the service issues (SPEC §2): AKID + 32 base62 characters, ".", a base64url secretKey.
const SECRET_ID = /^AKID[A-Za-z0-9]{32}$/;
const SECRET_KEY = /^[A-Za-z0-9_-]{43,128}$/;
const EXPECTED = 'expected <secretId>.<secretKey>, the token shown once when the credential was created';

/** The token in what was pasted: a copied "Authorization: Bearer …" header line is accepted too. */
export function tokenOf(pasted: string): string {
  return pasted.trim().replace(/^authorization:\s*/i, '').replace(/^bearer\s+/i, '').trim();
}

/** Why the token cannot be a credential of this service, or undefined when it has the shape of one. */
export function malformedCredential(token: string): string | undefined {
  const malformed = (why: string) => `This credential is malformed: ${EXPECTED}. ${why}`;
  if (/\s/.test(token)) return malformed('It contains a space or a line break: paste the token alone.');
  const dot = token.indexOf('.');
  if (dot < 0) return malformed('It has no "." between the secretId and the secretKey.');
  if (!SECRET_ID.test(token.slice(0, dot))) return malformed('The part before the "." is not a secretId: AKID followed by 32 letters and digits.');
  if (!SECRET_KEY.test(token.slice(dot + 1))) return malformed('The part after the "." is not a secretKey: 43 or more letters, digits, "-" and "_".');
  return undefined;
}

/**
 * The sign-in message for the service's answer to a well-formed credential; undefined when the
 * service's own message is the right one to show (a server failure, say, with its request id).
 */
export function signInMessage(failure: Failure): string | undefined {
  switch (failure.code) {
    case 'AuthFailure':
      return 'This credential was refused: it is unknown, disabled, or its secretKey is wrong. Check that you pasted the whole token, or create a new credential.';
    case 'RequestLimitExceeded':
      return 'Too many requests with this credential just now: wait a moment and sign in again.';
    case 'ClientError.Network':
      return 'The service did not answer: check the connection and sign in again.';
    default:
      return undefined;
  }
}
