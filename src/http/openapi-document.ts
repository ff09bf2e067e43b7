// The OpenAPI document as clients read it: what the route schemas cannot say is added here, once,
// after fastify-type-provider-zod has turned the zod schemas into components.
// - Input twins: the plugin emits every named model twice, `X` (io: 'output') and `XInput`
//   (io: 'input'), whether or not a request uses it. An `XInput` stays only when a request refers
//   to it and it differs from `X` (an output object is closed with additionalProperties: false, a
//   request object is not), so generated clients do not carry two names for one type.
// - Response headers: Fastify sets them in hooks and handlers, out of the schemas' sight.
import type { SwaggerTransformObject } from '@fastify/swagger';
import { jsonSchemaTransformObject } from 'fastify-type-provider-zod';

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type JsonNode = { [key: string]: Json };

const SCHEMAS = '#/components/schemas/';
const HEADERS = '#/components/headers/';

/** Operations whose successful answers carry the session's revision as `ETag` (for If-Match). */
const ETAG_OPERATIONS = new Set(['createSession', 'describeSession', 'modifySession', 'appendEvents', 'getContext', 'putContext']);

const RESPONSE_HEADERS: Record<string, JsonNode> = {
  'X-Request-Id': {
    description: 'The request id: the caller\'s own X-Request-Id when well formed, otherwise generated. Logs carry it.',
    required: true,
    schema: { type: 'string' },
  },
  ETag: {
    description: 'The session revision, `"<revision>"`: send it as If-Match to change the session only if it is unchanged.',
    required: true,
    schema: { type: 'string' },
  },
  'Retry-After': { description: 'Seconds to wait before retrying.', schema: { type: 'integer', minimum: 1 } },
  'X-RateLimit-Limit': { description: 'Requests this credential may make per window (when rate limiting is on).', schema: { type: 'integer', minimum: 0 } },
  'X-RateLimit-Remaining': { description: 'Requests left in the current window (when rate limiting is on).', schema: { type: 'integer', minimum: 0 } },
  'X-RateLimit-Reset': { description: 'Seconds until the current window ends (when rate limiting is on).', schema: { type: 'integer', minimum: 0 } },
};

const isNode = (value: Json | undefined): value is JsonNode => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Rewrites every `$ref` in `node` through `rename` (a copy; the input is left as it is). */
function mapRefs(node: Json, rename: (ref: string) => string): Json {
  if (Array.isArray(node)) return node.map((entry) => mapRefs(entry, rename));
  if (!isNode(node)) return node;
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, key === '$ref' && typeof value === 'string' ? rename(value) : mapRefs(value, rename)]));
}

/**
 * Drops each `XInput` that is the same schema as `X` once references to merged twins are read as
 * one. Twins referring to each other are decided together: start by assuming every pair merges and
 * take back those that still differ, until nothing changes.
 */
export function mergeIdenticalInputTwins(document: JsonNode): JsonNode {
  const schemas = (document.components as JsonNode).schemas as JsonNode;
  const merged = new Set(Object.keys(schemas).filter((name) => name.endsWith('Input') && name.slice(0, -'Input'.length) in schemas));
  const rename = (ref: string) => (ref.startsWith(SCHEMAS) && merged.has(ref.slice(SCHEMAS.length)) ? ref.slice(0, -'Input'.length) : ref);
  for (let changed = true; changed; ) {
    changed = false;
    for (const name of merged) {
      const base = name.slice(0, -'Input'.length);
      if (JSON.stringify(mapRefs(schemas[name]!, rename)) !== JSON.stringify(mapRefs(schemas[base]!, rename))) {
        merged.delete(name);
        changed = true;
      }
    }
  }
  const result = mapRefs(document, rename) as JsonNode;
  const components = result.components as JsonNode;
  const kept = components.schemas as JsonNode;
  const used = referencedSchemas(result);
  components.schemas = Object.fromEntries(
    Object.entries(kept).filter(([name]) => !merged.has(name) && (used.has(name) || !(name.endsWith('Input') && name.slice(0, -'Input'.length) in kept))),
  );
  return result;
}

/** Names of the schemas the operations refer to, directly or through other schemas. */
function referencedSchemas(document: JsonNode): Set<string> {
  const schemas = (document.components as JsonNode).schemas as JsonNode;
  const found = new Set<string>();
  const visit = (node: Json | undefined): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!isNode(node)) return;
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith(SCHEMAS)) {
        const name = value.slice(SCHEMAS.length);
        if (!found.has(name)) {
          found.add(name);
          visit(schemas[name]);
        }
      } else visit(value);
    }
  };
  visit(document.paths);
  return found;
}

/** Declares the headers the service sets on responses, by reference to `components.headers`. */
export function declareResponseHeaders(document: JsonNode): JsonNode {
  const components = document.components as JsonNode;
  components.headers = { ...(isNode(components.headers) ? components.headers : {}), ...RESPONSE_HEADERS };
  for (const [path, methods] of Object.entries(document.paths as JsonNode)) {
    for (const operation of Object.values(methods as JsonNode)) {
      if (!isNode(operation) || !isNode(operation.responses)) continue;
      for (const [status, response] of Object.entries(operation.responses)) {
        if (!isNode(response)) continue;
        const names = ['X-Request-Id'];
        if (status.startsWith('2') && ETAG_OPERATIONS.has(String(operation.operationId))) names.push('ETag');
        if (status === '429' || status === '503') names.push('Retry-After');
        // The /v1 scope is rate limited per credential; the limiter adds these to what it counts.
        if (path.startsWith('/v1/')) names.push('X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset');
        response.headers = { ...(isNode(response.headers) ? response.headers : {}), ...Object.fromEntries(names.map((name) => [name, { $ref: HEADERS + name }])) };
      }
    }
  }
  return document;
}

/** Operations answering server-sent events: their 200 is text/event-stream, not the JSON the route schema implies. */
const EVENT_STREAM_OPERATIONS = new Set(['streamEvents']);

export function declareEventStreams(document: JsonNode): JsonNode {
  for (const methods of Object.values(document.paths as JsonNode)) {
    for (const operation of Object.values(methods as JsonNode)) {
      if (!isNode(operation) || !EVENT_STREAM_OPERATIONS.has(String(operation.operationId)) || !isNode(operation.responses)) continue;
      const ok = operation.responses['200'];
      if (!isNode(ok) || !isNode(ok.content)) continue;
      const json = ok.content['application/json'];
      ok.content = { 'text/event-stream': isNode(json) ? json : { schema: { type: 'string' } } };
    }
  }
  return document;
}

/** fastify-type-provider-zod's components, then the twins merged and the response headers declared. */
export const openapiTransformObject: SwaggerTransformObject = (input) => {
  const document = jsonSchemaTransformObject(input) as unknown as JsonNode;
  return declareEventStreams(declareResponseHeaders(mergeIdenticalInputTwins(document))) as unknown as ReturnType<SwaggerTransformObject>;
};
