// The Tencent Cloud API 3.0 face: POST / (and TENCENT_API_PATH) with `X-TC-Action`, signed with
// TC3-HMAC-SHA256, answering `{"Response": {..., "RequestId"}}`. Errors go out with HTTP 200 and
// `Response.Error.{Code, Message}`: the SDKs read a code from no other status. The actions call
// the same services as the REST routes (tc3-actions.ts). docs/tencent-api.md has the details.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { isDatabaseUnavailable } from '../../db/errors.js';
import { AppError } from '../../errors.js';
import { authorize } from '../../http/authorization.js';
import { type RateLimitCounters, registerRateLimit } from '../../http/rate-limit.js';
import { findInexactInteger, findUnstorableText, guardedJsonBodyParser, unsupportedCharset } from '../../http/request-text.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import type { AppendDeps } from '../events/index.js';
import type { Principal } from '../../lib/principal.js';
import type { CredentialCache } from '../accounts/index.js';
import { findSpaceOrThrow } from '../spaces/index.js';
import { type SignatureRecord, authenticateSignedRequest } from './signature-auth.service.js';
import type { Tc3Context } from './tc3-action.js';
import { dispatchAction } from './tc3-actions.js';
import { Tc3Error, fromAppError } from './tc3-errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The body's bytes as received: the signature covers them, not their parsed value. */
    tc3RawBody: Buffer | undefined;
  }
}

export interface Tc3RouteOptions {
  /** TENCENT_API_PATH, served besides `/`. */
  extraPath?: string | undefined;
  credentialCache?: CredentialCache | undefined;
  /** The counters the REST API's limiter uses too: one budget per credential across both faces. */
  rateLimitCounters: RateLimitCounters;
  /** The signatures accepted so far (shared through Redis with REDIS_URL): each is accepted once. */
  usedSignatures: SignatureRecord;
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const header = (request: FastifyRequest, name: string): string | undefined => {
  const value = request.headers[name];
  return Array.isArray(value) ? value.join(',') : value;
};

/** Registers the endpoint in `scope`, an encapsulated plugin of its own (parser, hooks, error handler). */
export async function tencentApiRoutes(scope: ZodApp, deps: AppDeps & AppendDeps, { extraPath, credentialCache, rateLimitCounters, usedSignatures }: Tc3RouteOptions): Promise<void> {
  const { noAccountDb: db, credentialMasterKey } = deps;
  scope.decorateRequest('principal', null as unknown as Principal);
  scope.decorateRequest('tc3RawBody', undefined);

  // The same strict UTF-8 JSON as the REST API (http/request-text.ts), keeping the raw bytes.
  scope.removeAllContentTypeParsers();
  const parseJson = guardedJsonBodyParser(scope);
  scope.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, body, done) => {
    request.tc3RawBody = body as Buffer;
    const charsetError = unsupportedCharset(request.headers['content-type']);
    if (charsetError) return done(charsetError, undefined);
    let text: string;
    try {
      text = strictUtf8.decode(body as Buffer);
    } catch {
      return done(new Tc3Error('InvalidParameter', 'The body is not valid UTF-8: JSON must be sent as UTF-8.'), undefined);
    }
    parseJson(request, text, (error: Error | null, value?: unknown) => {
      if (error) done(error, undefined);
      else done(findInexactInteger(text) ?? findUnstorableText(value, 'body') ?? null, value);
    });
  });

  scope.setErrorHandler((error, request, reply) => {
    const tc3 = toTc3Error(error as FastifyError);
    if (tc3.code === 'InternalError') request.log.error({ err: error }, 'API 3.0 request failed');
    return sendEnvelope(request, reply, { Error: { Code: tc3.code, Message: tc3.message } });
  });

  // Authentication before the rate limit (which is keyed by the verified credential), as on /v1.
  scope.addHook('preValidation', async (request) => {
    request.principal = await authenticateSignedRequest(
      db,
      {
        authorization: header(request, 'authorization'),
        timestamp: header(request, 'x-tc-timestamp'),
        action: header(request, 'x-tc-action'),
        method: request.method,
        path: request.url.split('?')[0]!,
        query: request.url.includes('?') ? request.url.slice(request.url.indexOf('?') + 1) : '',
        headers: Object.fromEntries(Object.entries(request.headers).map(([name, value]) => [name, Array.isArray(value) ? value.join(',') : (value ?? '')])),
        payload: request.tc3RawBody ?? Buffer.alloc(0),
      },
      { masterKey: credentialMasterKey, cache: credentialCache, usedSignatures },
    );
  });
  await registerRateLimit(scope, deps.limits, rateLimitCounters);

  const handler = async (request: FastifyRequest, reply: FastifyReply) => {
    const { principal } = request;
    const context: Tc3Context = {
      db: request.db,
      limits: deps.limits,
      pageTokens: deps.pageTokens,
      metrics: deps.metrics,
      expensiveSlots: deps.expensiveSlots,
      eventFeed: deps.eventFeed,
      appendPath: deps.appendPath,
      principal,
      authorize: (action, resourceScope, spaceId) => authorize((accountId, id) => findSpaceOrThrow(request.db, accountId, id), principal, action, resourceScope, spaceId),
    };
    const fields = await dispatchAction(context, header(request, 'x-tc-action'), header(request, 'x-tc-version'), request.body);
    return sendEnvelope(request, reply, fields);
  };
  // Hidden from the OpenAPI document's operations (its fuzzing drives every listed one as REST);
  // the document's description and the `tencent-api` tag describe it instead.
  for (const path of new Set(['/', ...(extraPath ? [extraPath] : [])])) scope.post(path, { schema: { hide: true } }, handler);
}

/** `{"Response": {...fields, "RequestId"}}` with HTTP 200; the SDK reads X-TC-TraceId back. */
function sendEnvelope(request: FastifyRequest, reply: FastifyReply, fields: Record<string, unknown>) {
  const traceId = header(request, 'x-tc-traceid');
  if (traceId && /^[A-Za-z0-9-]{1,128}$/.test(traceId)) reply.header('x-tc-traceid', traceId);
  return reply.status(200).type('application/json').send({ Response: { ...fields, RequestId: request.id } });
}

function toTc3Error(error: FastifyError): Tc3Error {
  if (error instanceof Tc3Error) return error;
  if (error instanceof AppError) return fromAppError(error);
  if (isDatabaseUnavailable(error)) return new Tc3Error('ResourceUnavailable.Database', 'The database is unavailable; retry later.');
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new Tc3Error('RequestSizeLimitExceeded', 'The request body is larger than the limit.');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new Tc3Error('InvalidParameter', 'Content-Type must be application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new Tc3Error('InvalidParameter', 'The body is empty: send the action\'s parameters as a JSON object ({} for none).');
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new Tc3Error('InvalidParameter', 'The body is not valid JSON.');
  }
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) return new Tc3Error('InvalidParameter', error.message);
  return new Tc3Error('InternalError', 'An internal error occurred; the RequestId identifies it in the server log.');
}
