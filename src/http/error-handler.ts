// Renders every error in the one envelope of docs/design.md §6: { error: { code, message, requestId, details? } }.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors, isResponseSerializationError } from 'fastify-type-provider-zod';
import { isDatabaseUnavailable } from '../db/errors.js';
import { AppError, type ErrorCode, type ParameterIssue } from '../errors.js';
import type { DatabaseOutage } from './database-outage.js';

const RETRY_AFTER_SECONDS = '2';

/**
 * The backstop's message for a value the database refused as data (SQLSTATE class 22: bad
 * encoding, out-of-range number or date…). Validation should have named the field first; the
 * property tests fail when a request ever gets this far.
 */
export const UNSTORABLE_VALUE_MESSAGE = 'A value in the request cannot be stored (the database refused it as data).';

export interface ErrorHandlingOptions {
  /** Told of every request answered 503 ResourceUnavailable.Database (database-outage.ts logs the outage once). */
  databaseOutage?: DatabaseOutage | undefined;
}

export function registerErrorHandling(app: FastifyInstance, { databaseOutage }: ErrorHandlingOptions = {}): void {
  app.setErrorHandler((error, request, reply) => {
    const appError = toAppError(error as FastifyError, request.routeOptions.bodyLimit);
    // A request refused during the shutdown drain is expected, not a failure of this instance.
    if (appError.code === 'ResourceUnavailable.ShuttingDown') request.log.info({ code: appError.code }, 'request refused: shutting down');
    else if (appError.code === 'ResourceUnavailable.Database') {
      // During an outage every request gets here: the outage is logged once, each request at debug, no stack.
      request.log.debug({ code: appError.code, reason: (error as Error).message }, 'request refused: database unavailable');
      databaseOutage?.requestRefused();
    } else if (appError.status >= 500) request.log.error({ err: error, code: appError.code }, 'request failed');
    else if (appError.message === UNSTORABLE_VALUE_MESSAGE) request.log.warn({ err: error }, 'a value reached the database unvalidated');
    return sendError(request, reply, appError);
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(request, reply, new AppError('ResourceNotFound.Route', `No route ${request.method} ${request.url.split('?')[0]}.`)),
  );
}

/**
 * Fastify's `frameworkErrors` option: errors the router raises before any route runs (a
 * percent-escape that does not decode, a path parameter over maxParamLength), which Fastify would
 * otherwise answer in its own format or with the whole URL as the message.
 */
export function renderFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  reply.header('x-request-id', request.id);
  const badPath = (message: string) => new AppError('InvalidParameter', `The URL path is not valid: ${message}.`, { details: { issues: [{ field: 'path', message }] } });
  const appError =
    error.code === 'FST_ERR_BAD_URL'
      ? badPath('a percent-escape does not decode to UTF-8')
      : error.code === 'FST_ERR_MAX_PARAM_LENGTH'
        ? badPath('a path parameter is longer than any identifier the API issues')
        : toAppError(error, undefined);
  return sendError(request, reply, appError);
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
  if (isDataException(error)) return new AppError('InvalidParameter', UNSTORABLE_VALUE_MESSAGE);
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

/** A PostgreSQL error of SQLSTATE class 22 (data exception): the statement's data, not the server, is at fault. */
function isDataException(error: unknown): boolean {
  const { code, severity } = error as { code?: unknown; severity?: unknown };
  return typeof code === 'string' && /^22[0-9A-Z]{3}$/.test(code) && typeof severity === 'string';
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
