// A caller's id as one segment of a request path. encodeURIComponent leaves "." and ".." alone, and
// fetch's URL parser (WHATWG) then resolves them as dot segments, as it does "%2e" and "%2e%2e":
// `deleteSession` with userId and sessionId ".." would send DELETE /v1/spaces/{spaceId}/ and delete
// the space. An empty id is as bad: `…/sessions/` names the list, which the server answers (it ignores a
// trailing slash). The server refuses such ids, but such a request never names them, so the client
// refuses them before sending anything, with the error the server gives for a bad parameter.
import { AgentSessionError } from './errors.js';

/** The server's wording (src/http/schemas.ts), so an id refused here reads as one refused there. */
export const DOT_SEGMENT_RULE = 'must not be "." or "..": a URL path segment of only dots is removed by clients and proxies (RFC 3986 §5.2.4)';
export const EMPTY_SEGMENT_RULE = 'must not be empty: a URL path without the id names another resource';

/** `value` encoded as the path segment of parameter `name`; throws 400 InvalidParameter when no path can carry it. */
export function pathSegment(name: string, value: unknown): string {
  const text = String(value);
  if (text === '.' || text === '..') throw invalidPathParameter(name, DOT_SEGMENT_RULE);
  if (text === '') throw invalidPathParameter(name, EMPTY_SEGMENT_RULE);
  return encodeURIComponent(text);
}

/** Checks ids that will be path segments, before work that should not happen for a request that cannot be sent. */
export function assertPathSegments(ids: Record<string, unknown>): void {
  for (const [name, value] of Object.entries(ids)) pathSegment(name, value);
}

/** The server's 400 for a bad parameter, field named in `details.issues`; no request id, since none was sent. */
function invalidPathParameter(field: string, rule: string): AgentSessionError {
  return new AgentSessionError({ code: 'InvalidParameter', status: 400, message: `${field}: ${rule}`, details: { issues: [{ field, message: rule }] } });
}
