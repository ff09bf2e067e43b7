// TC3-HMAC-SHA256 against fixed vectors. Each expected Authorization header below was computed
// once with the official SDK's own signing function (tencentcloud-sdk-nodejs-common 4.1.220,
// `Sign.sign3`) and written down; the test also recomputes them with the SDK, so a vector that
// drifted from the SDK fails too.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { parseTc3Authorization, signaturesEqual, tc3CanonicalRequest, tc3Date, tc3Signature, tc3SignatureMatches, tc3StringToSign } from '../../src/lib/tc3-signature.js';

type Sign3 = (options: Record<string, unknown>) => string;
const sdkSign3 = (createRequire(import.meta.url)('tencentcloud-sdk-nodejs-common/tencentcloud/common/sign.js') as { default: { sign3: Sign3 } }).default.sign3;

const secretId = 'AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE';
const secretKey = 'Gu5t9xGARNpq86cd98joQYCN3EXAMPLE';

const VECTORS = [
  {
    name: 'a CreateSessionSpace body to 127.0.0.1:8080 (service "127")',
    url: 'http://127.0.0.1:8080/',
    payload: { Name: 'support-bot', Description: 'spaces for the support agent' },
    timestamp: 1764583200,
    service: '127',
    authorization:
      'TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2025-12-01/127/tc3_request, SignedHeaders=content-type;host, Signature=6c3560852b52e1457deaedef6d8a2bc008885706d0a02aee8d052dfc8f652569',
  },
  {
    name: 'a body with non-ASCII text (CJK, Latin-1, an astral emoji)',
    url: 'http://127.0.0.1:8080/',
    payload: { SpaceId: 'space-0b9d6f3e-6a57-4a43-9a4f-3d3f0f1c2b1a', UserId: 'u-1', Title: '客服会话 — Grüße 👋' },
    timestamp: 1764583200,
    service: '127',
    authorization:
      'TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2025-12-01/127/tc3_request, SignedHeaders=content-type;host, Signature=9870c33495ca14d106411b289bc6a11908b608b038641413a62ad14b3de324c2',
  },
  {
    name: 'an empty parameter object to the real endpoint (service "ags")',
    url: 'https://ags.tencentcloudapi.com/',
    payload: {},
    timestamp: 1764586799,
    service: 'ags',
    authorization:
      'TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2025-12-01/ags/tc3_request, SignedHeaders=content-type;host, Signature=0445e4ea3120e692efb9aa8658afb13a1055742e906174505fb5dbe44f27ecaa',
  },
  {
    name: 'a request to a configured path (/tc3/)',
    url: 'http://127.0.0.1:8080/tc3/',
    payload: { Limit: 5 },
    timestamp: 1764583200,
    service: '127',
    authorization:
      'TC3-HMAC-SHA256 Credential=AKIDz8krbsJ5yKBZQpn74WFkmLPx3EXAMPLE/2025-12-01/127/tc3_request, SignedHeaders=content-type;host, Signature=baab95f0642a3a17f8de3b0e10093eefb3befcd40c58968359175d3866bd04a7',
  },
];

/** The request as the server receives it: Host with the port, the body's UTF-8 bytes. */
function received(vector: (typeof VECTORS)[number]) {
  const url = new URL(vector.url);
  return {
    method: 'POST',
    path: url.pathname,
    query: '',
    headers: { 'content-type': 'application/json', host: url.host },
    signedHeaders: ['content-type', 'host'],
    payload: Buffer.from(JSON.stringify(vector.payload), 'utf8'),
  };
}

describe('TC3-HMAC-SHA256 against vectors of the official SDK', () => {
  for (const vector of VECTORS) {
    it(`matches the SDK for ${vector.name}`, () => {
      // The SDK still computes the recorded vector.
      expect(sdkSign3({ method: 'POST', url: vector.url, payload: vector.payload, timestamp: vector.timestamp, service: vector.service, secretId, secretKey, headers: { 'Content-Type': 'application/json' } })).toBe(
        vector.authorization,
      );
      const parsed = parseTc3Authorization(vector.authorization)!;
      expect(parsed).toMatchObject({ secretId, date: tc3Date(vector.timestamp), service: vector.service, signedHeaders: ['content-type', 'host'] });
      // Computed step by step, with the host signed without its port as the Node SDK does.
      const request = received(vector);
      const canonical = tc3CanonicalRequest({ ...request, headers: { ...request.headers, host: new URL(vector.url).hostname } });
      const signature = tc3Signature(secretKey, parsed.date, parsed.service, tc3StringToSign(vector.timestamp, parsed.date, parsed.service, canonical));
      expect(signature).toBe(parsed.signature);
      expect(tc3SignatureMatches(secretKey, parsed, vector.timestamp, request)).toBe(true);
    });
  }

  it('builds the canonical request of API 3.0 exactly', () => {
    const request = { ...received(VECTORS[0]!), headers: { 'content-type': 'application/json', host: '127.0.0.1' } };
    expect(tc3CanonicalRequest(request)).toBe(
      ['POST', '/', '', 'content-type:application/json\nhost:127.0.0.1\n', 'content-type;host', 'a36de47612229a8701a04153a71a44b49a3e4634203587a5e7c9738e5f602c67'].join('\n'),
    );
  });

  it('refuses a body changed by one byte, another key, another timestamp, service or path', () => {
    const vector = VECTORS[1]!;
    const parsed = parseTc3Authorization(vector.authorization)!;
    const request = received(vector);
    const changedBody = Buffer.from(JSON.stringify({ ...vector.payload, Title: '客服会话 — Grüße 👍' }), 'utf8');
    expect(tc3SignatureMatches(secretKey, parsed, vector.timestamp, { ...request, payload: changedBody })).toBe(false);
    expect(tc3SignatureMatches(`${secretKey}x`, parsed, vector.timestamp, request)).toBe(false);
    expect(tc3SignatureMatches(secretKey, parsed, vector.timestamp + 1, request)).toBe(false);
    expect(tc3SignatureMatches(secretKey, { ...parsed, service: 'ags' }, vector.timestamp, request)).toBe(false);
    expect(tc3SignatureMatches(secretKey, parsed, vector.timestamp, { ...request, path: '/other' })).toBe(false);
  });

  it('accepts a host signed with its port too (SDKs that sign the endpoint as given)', () => {
    const request = received(VECTORS[0]!);
    const canonical = tc3CanonicalRequest(request); // host:127.0.0.1:8080
    const parsed = parseTc3Authorization(VECTORS[0]!.authorization)!;
    const signature = tc3Signature(secretKey, parsed.date, parsed.service, tc3StringToSign(VECTORS[0]!.timestamp, parsed.date, parsed.service, canonical));
    expect(tc3SignatureMatches(secretKey, { ...parsed, signature }, VECTORS[0]!.timestamp, request)).toBe(true);
  });

  it('parses only the TC3 Authorization shape', () => {
    expect(parseTc3Authorization('Bearer AKIDx.y')).toBeUndefined();
    expect(parseTc3Authorization('TC3-HMAC-SHA256 Credential=AKID/2025-12-01/ags/tc3_request, SignedHeaders=content-type;host, Signature=abc')).toBeUndefined();
    expect(parseTc3Authorization(VECTORS[0]!.authorization.replace('tc3_request', 'tc4_request'))).toBeUndefined();
  });

  it('compares signatures by value and length', () => {
    expect(signaturesEqual('ab', 'ab')).toBe(true);
    expect(signaturesEqual('ab', 'ac')).toBe(false);
    expect(signaturesEqual('ab', 'abc')).toBe(false);
  });

  it('dates a timestamp in UTC', () => {
    expect(tc3Date(1764633599)).toBe('2025-12-01');
    expect(tc3Date(1764633600)).toBe('2025-12-02');
  });
});
