// TC3-HMAC-SHA256, the request signature of Tencent Cloud API 3.0, as the official SDKs compute
// it (tencentcloud-sdk-nodejs-common `sign.js`): a canonical request, a credential scope
// `<date>/<service>/tc3_request`, and a signing key derived from the secret key by HMAC-SHA256.
// Pure: no I/O, no clock (the caller passes the server's time).
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

export const TC3_ALGORITHM = 'TC3-HMAC-SHA256';
/** How far X-TC-Timestamp may be from the server's clock, either way (the API 3.0 rule). */
export const TC3_MAX_CLOCK_SKEW_SECONDS = 300;

/** The parts of `Authorization: TC3-HMAC-SHA256 Credential=…, SignedHeaders=…, Signature=…`. */
export interface Tc3Authorization {
  secretId: string;
  /** YYYY-MM-DD of the credential scope. */
  date: string;
  /** The scope's service: the endpoint's first dot-label for the SDKs (`ags`, or `127` for 127.0.0.1). */
  service: string;
  /** Lower-case header names, in the order given. */
  signedHeaders: string[];
  /** 64 lower-case hex characters. */
  signature: string;
}

const AUTHORIZATION = /^TC3-HMAC-SHA256\s+Credential=([^/,\s]+)\/(\d{4}-\d{2}-\d{2})\/([^/,\s]+)\/tc3_request,\s*SignedHeaders=([a-z0-9;-]+),\s*Signature=([0-9a-f]{64})\s*$/;

/** Undefined when the header does not have the TC3 shape. */
export function parseTc3Authorization(header: string): Tc3Authorization | undefined {
  const match = AUTHORIZATION.exec(header);
  if (!match) return undefined;
  const [, secretId, date, service, signedHeaders, signature] = match as unknown as [string, string, string, string, string, string];
  return { secretId, date, service, signedHeaders: signedHeaders.split(';'), signature };
}

export interface Tc3Request {
  method: string;
  /** The request path as sent (`/`), without the query string. */
  path: string;
  /** The raw query string without `?` (empty for the POST requests of the SDKs). */
  query: string;
  /** The value of each signed header, by lower-case name; `host` as the client signed it. */
  headers: Record<string, string>;
  signedHeaders: string[];
  /** The body's bytes exactly as received. */
  payload: Buffer;
}

const sha256Hex = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');
const hmac = (key: string | Buffer, data: string) => createHmac('sha256', key).update(data, 'utf8').digest();

/**
 * The canonical request. Header values are trimmed and lower-cased (API 3.0 rule); the SDKs send
 * `content-type:application/json` and the host without its port.
 */
export function tc3CanonicalRequest(request: Tc3Request): string {
  const canonicalHeaders = request.signedHeaders.map((name) => `${name}:${(request.headers[name] ?? '').trim().toLowerCase()}\n`).join('');
  return [request.method.toUpperCase(), request.path, request.query, canonicalHeaders, request.signedHeaders.join(';'), sha256Hex(request.payload)].join('\n');
}

/** YYYY-MM-DD (UTC) of a Unix time in seconds. */
export function tc3Date(timestampSeconds: number): string {
  return new Date(timestampSeconds * 1000).toISOString().slice(0, 10);
}

export function tc3StringToSign(timestampSeconds: number, date: string, service: string, canonicalRequest: string): string {
  return [TC3_ALGORITHM, String(timestampSeconds), `${date}/${service}/tc3_request`, sha256Hex(canonicalRequest)].join('\n');
}

/** The hex signature of `stringToSign` under the key derived from `secretKey`, `date` and `service`. */
export function tc3Signature(secretKey: string, date: string, service: string, stringToSign: string): string {
  const kDate = hmac(`TC3${secretKey}`, date);
  const kService = hmac(kDate, service);
  const kSigning = hmac(kService, 'tc3_request');
  return createHmac('sha256', kSigning).update(stringToSign, 'utf8').digest('hex');
}

/** Compares two hex signatures in constant time (for equal lengths; the length is public). */
export function signaturesEqual(expected: string, given: string): boolean {
  const a = Buffer.from(expected, 'utf8');
  const b = Buffer.from(given, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Whether `authorization` is a valid signature of `request` at `timestampSeconds` under
 * `secretKey`. The host is tried as the client may have signed it: the Node SDK signs the host
 * name without the port (`new URL(url).hostname`), other SDKs sign the endpoint as given, with it.
 */
export function tc3SignatureMatches(secretKey: string, authorization: Tc3Authorization, timestampSeconds: number, request: Tc3Request): boolean {
  const host = request.headers.host ?? '';
  const hostWithoutPort = host.replace(/:\d+$/, '');
  const hosts = hostWithoutPort === host ? [host] : [hostWithoutPort, host];
  let matched = false;
  for (const candidate of hosts) {
    const canonical = tc3CanonicalRequest({ ...request, headers: { ...request.headers, host: candidate } });
    const stringToSign = tc3StringToSign(timestampSeconds, authorization.date, authorization.service, canonical);
    // Every candidate is computed and compared, so the time taken does not tell which one matched.
    if (signaturesEqual(tc3Signature(secretKey, authorization.date, authorization.service, stringToSign), authorization.signature)) matched = true;
  }
  return matched;
}
