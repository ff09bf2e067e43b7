// Authentication of API 3.0 requests: the TC3-HMAC-SHA256 signature, checked with the secret key
// of an existing credential (the `<secretId>.<secretKey>` pair of the REST bearer token). Verifying
// an HMAC needs the secret itself, so it comes from the credential's AES-256-GCM copy
// (credentials.secret_encrypted, under CREDENTIAL_MASTER_KEY); the plain key is held only for the
// duration of the check and never logged or cached.
//
// Round trips: as for bearer tokens (http/auth.ts): none for a credential in the cache, one on a
// miss, plus the once-a-minute last-use write; and, with REDIS_URL, one script call (EVAL) for the
// signature.
//
// A signature is accepted once (reads and CreateSession may share one, each action once:
// http/used-signatures.ts). The SDKs sign only `content-type;host`, so neither the action nor
// anything else in the X-TC-* headers is covered: without this rule a captured request could be
// sent again within the timestamp window, or sent with another X-TC-Action (a DescribeSession
// body whose fields also fit DeleteSession). The signature is recorded only once it has been
// checked (garbage cannot fill the record) and recorded atomically (of two instances given the
// same request at once, one proceeds). docs/tencent-api.md, "Each signature is accepted once".
import type { Database } from '../../db/connect.js';
import type { Principal } from '../../lib/principal.js';
import { TC3_MAX_CLOCK_SKEW_SECONDS, type Tc3Request, parseTc3Authorization, tc3Date, tc3SignatureMatches } from '../../lib/tc3-signature.js';
import {
  lookUpCredential,
  principalOf,
  recordCredentialUse,
  type CredentialCache,
  isSecretId,
  decryptSecret,
} from '../accounts/index.js';
import { Tc3Error } from './tc3-errors.js';

export interface SignedRequest extends Omit<Tc3Request, 'signedHeaders'> {
  authorization: string | undefined;
  /** X-TC-Timestamp as sent. */
  timestamp: string | undefined;
  /** X-TC-Action as sent (not signed: the signature record's rule depends on it). */
  action: string | undefined;
}

/** Where accepted signatures are recorded (http/used-signatures.ts: Redis, or this instance's memory). */
export interface SignatureRecord {
  /** True when `signature` may be used for `action` (http/used-signatures.ts has the rule); false for a repeat it refuses, until `keepUntilSeconds`. */
  claim(signature: string, action: string, keepUntilSeconds: number): Promise<boolean>;
}

export interface SignatureAuthOptions {
  masterKey: Buffer | undefined;
  cache: CredentialCache | undefined;
  usedSignatures: SignatureRecord;
  /** The server's clock in seconds (tests of the window pass their own). */
  nowSeconds?: number;
}

const INSTANCE_CLOCK_MARGIN_SECONDS = 60;

/** The principal of a correctly signed, fresh request, or a Tc3Error with the API 3.0 code. */
export async function authenticateSignedRequest(db: Database, request: SignedRequest, options: SignatureAuthOptions): Promise<Principal> {
  if (!request.authorization) throw new Tc3Error('AuthFailure.InvalidAuthorization', 'The Authorization header is missing: sign the request with TC3-HMAC-SHA256.');
  const authorization = parseTc3Authorization(request.authorization);
  if (!authorization) {
    throw new Tc3Error(
      'AuthFailure.InvalidAuthorization',
      'The Authorization header is not "TC3-HMAC-SHA256 Credential=<SecretId>/<date>/<service>/tc3_request, SignedHeaders=…, Signature=<64 hex>".',
    );
  }
  if (!authorization.signedHeaders.includes('content-type') || !authorization.signedHeaders.includes('host')) {
    throw new Tc3Error('AuthFailure.InvalidAuthorization', 'SignedHeaders must include content-type and host.');
  }
  if (!request.timestamp) throw new Tc3Error('MissingParameter', 'X-TC-Timestamp: the header is missing; it must be the Unix time of the request in seconds.');
  const timestamp = /^\d{1,12}$/.test(request.timestamp) ? Number(request.timestamp) : undefined;
  if (timestamp === undefined) {
    throw new Tc3Error('InvalidParameterValue', `X-TC-Timestamp: must be the Unix time of the request in whole seconds (digits only), not ${JSON.stringify(request.timestamp.slice(0, 32))}.`);
  }
  const now = options.nowSeconds ?? Math.floor(Date.now() / 1000);
  if (Math.abs(now - timestamp) > TC3_MAX_CLOCK_SKEW_SECONDS) {
    throw new Tc3Error('AuthFailure.SignatureExpire', `X-TC-Timestamp ${timestamp} is more than ${TC3_MAX_CLOCK_SKEW_SECONDS} s from the server time ${now}: check the client's clock.`);
  }
  if (authorization.date !== tc3Date(timestamp)) {
    throw new Tc3Error('AuthFailure.SignatureFailure', `The credential scope's date ${authorization.date} is not the UTC date of X-TC-Timestamp (${tc3Date(timestamp)}).`);
  }
  if (!isSecretId(authorization.secretId)) throw new Tc3Error('AuthFailure.InvalidSecretId', 'The SecretId is not valid: it is AKID followed by 32 letters and digits.');
  if (!options.masterKey) {
    throw new Tc3Error(
      'UnsupportedOperation',
      'This server has no CREDENTIAL_MASTER_KEY, so it keeps no copy of secret keys to check signatures with: the operator must set CREDENTIAL_MASTER_KEY. Bearer tokens on /v1 still work.',
    );
  }

  const credential = await lookUpCredential(db, authorization.secretId, options.cache);
  if (!credential || credential.status !== 'enabled') throw new Tc3Error('AuthFailure.SecretIdNotFound', 'The SecretId is unknown or disabled.');
  const secretKey = decryptedKey(options.masterKey, credential.secret_encrypted);
  const signed = { ...request, signedHeaders: authorization.signedHeaders };
  if (!tc3SignatureMatches(secretKey, authorization, timestamp, signed)) {
    throw new Tc3Error('AuthFailure.SignatureFailure', 'The signature does not match: check the SecretKey and that the request was not changed after signing.');
  }
  // Kept until no instance can accept the timestamp any more: the end of its window, plus a margin
  // for instances whose clocks run behind this one's.
  if (!(await options.usedSignatures.claim(authorization.signature, request.action ?? '', timestamp + TC3_MAX_CLOCK_SKEW_SECONDS + INSTANCE_CLOCK_MARGIN_SECONDS))) {
    throw new Tc3Error(
      'AuthFailure.SignatureFailure',
      'This signature was already used: a signed request is accepted once, and only reads and CreateSession may share a signature, each action once. Sign every request anew (the SDKs sign each call); two requests with the same body signed within the same second carry the same signature (the action is not signed), so send the second a second later.',
    );
  }
  await recordCredentialUse(db, credential, options.cache);
  return principalOf(credential);
}

const NO_COPY_MESSAGE =
  'This credential has no encrypted copy of its secret key readable with the server\'s CREDENTIAL_MASTER_KEY ' +
  '(it was created before the key was set, or under another key), so its signatures cannot be checked. ' +
  'It still works as a bearer token; create a new credential (POST /v1/iam/credentials, or `npm run admin -- rotate-root-credential`) to sign requests.';

function decryptedKey(masterKey: Buffer, sealed: Buffer | null): string {
  if (!sealed) throw new Tc3Error('AuthFailure.InvalidSecretId', NO_COPY_MESSAGE);
  try {
    return decryptSecret(masterKey, sealed);
  } catch {
    throw new Tc3Error('AuthFailure.InvalidSecretId', NO_COPY_MESSAGE);
  }
}
