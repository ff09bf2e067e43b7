// The answers Fastify's routes never see, in the same envelope as every other error:
// - a request Node's HTTP parser refuses before there is a request (headers over Node's
//   --max-http-header-size: 431; headers or body not in time: 408; malformed HTTP: 400). Node
//   hands these to the server's `clientError` listener, which Fastify lets us replace with
//   `clientErrorHandler`; the answer is written to the raw socket, which is then closed;
// - a request that arrives while the app drains for shutdown (on a keep-alive connection that was
//   busy when close() began, or pipelined behind a request in flight): 503 with Retry-After,
//   instead of Fastify's own `return503OnClosing` body.
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { AppError, type ErrorCode } from '../errors.js';

export const SHUTDOWN_RETRY_AFTER_SECONDS = '1';

interface ConnectionError extends Error {
  code?: string;
}

function connectionErrorCode(error: ConnectionError): { code: ErrorCode; message: string } {
  switch (error.code) {
    case 'HPE_HEADER_OVERFLOW':
      return { code: 'LimitExceeded.RequestHeaders', message: 'The request headers are larger than the server accepts.' };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { code: 'RequestTimeout', message: 'The request did not arrive in time.' };
    default:
      return { code: 'InvalidParameter', message: 'The request is not well-formed HTTP.' };
  }
}

/** Fastify's `clientErrorHandler` option; `this` is the Fastify instance, as in Fastify's own default. */
export function clientErrorHandler(this: FastifyInstance, error: ConnectionError, socket: Socket): void {
  // A connection reset or an already destroyed socket: there is no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { code, message } = connectionErrorCode(error);
  const appError = new AppError(code, message);
  // No request object exists: the id is made here, and logged, so that a report still lines up.
  const requestId = randomUUID();
  this.log.info({ requestId, err: { code: error.code, message: error.message }, statusCode: appError.status }, 'connection refused before routing');
  if (socket.writable) {
    const body = JSON.stringify({ error: { code: appError.code, message: appError.message, requestId } });
    socket.write(
      `HTTP/1.1 ${appError.status} ${STATUS_CODES[appError.status]}\r\n` +
        `Content-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

/**
 * Refuses requests once close() has begun (Fastify's own 503 is turned off with
 * `return503OnClosing: false`): in the error envelope, with Retry-After, and without running
 * authentication or any handler. Register before the other onRequest hooks.
 */
export function registerShutdownRefusal(app: FastifyInstance): void {
  let closing = false;
  app.addHook('preClose', async () => {
    closing = true;
  });
  // A callback hook, not an async one: no promise per request (request-logging.ts).
  app.addHook('onRequest', (_request, _reply, done) => {
    if (!closing) return done();
    done(
      new AppError('ResourceUnavailable.ShuttingDown', 'This instance is shutting down; retry the request (another instance will answer it).', {
        headers: { 'retry-after': SHUTDOWN_RETRY_AFTER_SECONDS, connection: 'close' },
      }),
    );
  });
}
