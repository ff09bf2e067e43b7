// Renders every error in the one envelope of SPEC §6: { error: { code, message, requestId, details? } }.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { isDatabaseUnavailable } from '../db/errors.js';
import { AppError, type ErrorCode, type ParameterIssue } from '../errors.js';

const RETRY_AFTER_SECONDS = '2';

export function registerErrorHandling(app: FastifyInstance): void {
  app.setErrorHandler((error, request, reply) => {
    const appError = toAppError(error as FastifyError, request.routeOptions.bodyLimit);
    if (appError.status >= 500) request.log.error({ err: error, code: appError.code }, 'request failed');
    return sendError(request, reply, appError);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new AppError('ResourceNotFound.Route', `No route ${request.method} ${request.url.split('?')[0]}.`)),
  );
}

function sendError(request: FastifyRequest, reply: FastifyReply, error: AppError) {
  for (const [name, value] of Object.entries(error.headers ?? {})) reply.header(name, value);
  return reply.status(error.status).send({
    error: { code: error.code, message: error.message, requestId: request.id, ...(error.details ? { details: error.details } : {}) },
  });
}

function toAppError(error: FastifyError, bodyLimit: number | undefined): AppError {
  if (error instanceof AppError) return error;
  if (hasZodFastifySchemaValidationErrors(error)) return fromValidation(error.validationContext ?? 'body', error.validation);
  if (isResponseSerializationError(error)) return new AppError('InternalError', 'The server failed to produce a valid response.');
  if (isDatabaseUnavailable(error)) {
    return new AppError('ResourceUnavailable.Database', 'The database is unavailable; retry later.', { headers: { 'retry-after': RETRY_AFTER_SECONDS } });
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      // Fastify's message carries no number; the route's resolved limit does.
      return new AppError('LimitExceeded.RequestSize', `The request body is larger than the limit${bodyLimit ? ` of ${bodyLimit} bytes` : ''}.`);
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new AppError('UnsupportedMediaType', 'The request body must be JSON: send Content-Type: application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new AppError('InvalidParameter', 'The body is empty but Content-Type is application/json: send a JSON document.', {
        details: { issues: [{ field: 'body', message: 'must be a JSON document' }] },
      });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new AppError('InvalidParameter', `The body is not valid JSON: ${error.message}`, {
        details: { issues: [{ field: 'body', message: 'must be valid JSON' }] },
      });
  }
  // Other errors Fastify raises for a bad request (malformed JSON, prototype poisoning, bad headers…).
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return new AppError('InvalidParameter', error.message);
  }
  return new AppError('InternalError', 'An internal error occurred; the request id identifies it in the server log.');
}

interface ValidationEntry {
  instancePath: string;
  message?: string;
  params?: unknown;
}

function fromValidation(context: string, entries: ValidationEntry[]): AppError {
  const issues: ParameterIssue[] = entries.map((entry) => ({ field: fieldName(context, entry.instancePath), message: entry.message ?? 'is invalid' }));
  const missing = entries.every((entry) => /received undefined/.test(entry.message ?? ''));
  const code: ErrorCode = missing ? 'MissingParameter' : 'InvalidParameter';
  const summary = issues.map((issue) => `${issue.field}: ${issue.message}`).join('; ');
  return new AppError(code, summary, { details: { issues } });
}

/** `/events/0/author` in the body → `events[0].author`; path and query fields are named bare. */
function fieldName(context: string, instancePath: string): string {
  const parts = instancePath.split('/').filter(Boolean);
  let name = '';
  for (const part of parts) name += /^\d+$/.test(part) ? `[${part}]` : name ? `.${part}` : part;
  if (context === 'body') return name || 'body';
  if (context === 'headers') return name;
  return name || context;
}
