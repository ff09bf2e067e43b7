// Every failure the client reports is an AgentSessionError: the server's error envelope
// ({ error: { code, message, requestId, details? } }) as a class, or a client-side code when no
// envelope arrived (the network failed, or something other than the service answered).

export const CLIENT_ERROR_CODES = {
  /**
   * No answer: the connection was refused, reset or timed out, after every retry allowed; or an
   * answer cut off mid-body (the error's status is then the answer's: the call ran).
   */
  network: 'ClientError.Network',
  /** An answer without the service's error envelope (a proxy's page, say). */
  unexpectedResponse: 'ClientError.UnexpectedResponse',
} as const;

export class AgentSessionError extends Error {
  override readonly name = 'AgentSessionError';
  /** `Category.Detail`, e.g. FailedOperation.PreconditionFailed; see docs/design.md §6. */
  readonly code: string;
  /** The HTTP status; 0 when no answer arrived. */
  readonly status: number;
  /** The server's request id (the one the client sent as X-Request-Id when the server kept it). */
  readonly requestId: string | undefined;
  readonly details: Record<string, unknown> | undefined;

  constructor(init: { code: string; status: number; message: string; requestId?: string; details?: Record<string, unknown>; cause?: unknown }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.code = init.code;
    this.status = init.status;
    this.requestId = init.requestId;
    this.details = init.details;
  }
}

/** The error for a non-2xx answer, from its envelope when it has one. */
export function errorFromResponse(status: number, body: unknown, requestIdHeader: string | null): AgentSessionError {
  const envelope = (body as { error?: { code?: unknown; message?: unknown; requestId?: unknown; details?: unknown } } | null)?.error;
  if (envelope && typeof envelope.code === 'string' && typeof envelope.message === 'string') {
    return new AgentSessionError({
      code: envelope.code,
      status,
      message: envelope.message,
      requestId: typeof envelope.requestId === 'string' ? envelope.requestId : (requestIdHeader ?? undefined),
      details: typeof envelope.details === 'object' && envelope.details !== null ? (envelope.details as Record<string, unknown>) : undefined,
    });
  }
  return new AgentSessionError({ code: CLIENT_ERROR_CODES.unexpectedResponse, status, message: `HTTP ${status} without an error envelope`, requestId: requestIdHeader ?? undefined });
}
