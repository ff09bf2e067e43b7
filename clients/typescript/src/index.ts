export { AgentSessionClient, type AgentSessionClientOptions } from './client.js';
export { AgentSessionError, CLIENT_ERROR_CODES } from './errors.js';
export { type AppendBody, type AppendEvent, withEventIds } from './event-ids.js';
export { readSseFrames, type SseFrame } from './event-stream.js';
export { OPERATIONS, type HttpMethod, type OperationId } from './operations.js';
export { backoffDelayMs, DEFAULT_RETRY_POLICY, isRetryableStatus, parseRetryAfterMs, repeatableAfterLostAnswer, type RetryPolicy, retryDelayMs } from './retry.js';
export type { Body, CallOptions, PageItem, Params, RequestOptions, Result } from './types.js';
export type { components, operations, paths } from './generated/openapi.js';
