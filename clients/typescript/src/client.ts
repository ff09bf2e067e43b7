// AgentSessionClient: one object per service and credential, a typed method per operation of the
// OpenAPI document, async iterators over the paged lists, and retries that cannot duplicate work.
import { AgentSessionError, CLIENT_ERROR_CODES, errorFromResponse } from './errors.js';
import { type AppendBody, withEventIds } from './event-ids.js';
import { readSseFrames } from './event-stream.js';
import type { components } from './generated/openapi.js';
import { OPERATIONS, type OperationId } from './operations.js';
import { pathSegment } from './path-segments.js';
import { DEFAULT_RETRY_POLICY, isNotFoundOfDelete, isRetryableStatus, neverSent, parseRetryAfterMs, repeatableAfterLostAnswer, type RetryPolicy, retryDelayMs } from './retry.js';
import type { Body, CallOptions, PageItem, Params, RequestOptions, Result } from './types.js';

export interface AgentSessionClientOptions {
  /** e.g. http://127.0.0.1:3000 (a path prefix is kept). */
  baseUrl: string;
  /** An API key (`<secretId>.<secret>`), sent as a Bearer token. */
  credential: string;
  /** Retries after network errors, 429 and 503 (default 3 retries, 200 ms base, 20 s cap). */
  retry?: Partial<RetryPolicy>;
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** How the client waits between attempts; tests inject one that does not. */
  sleep?: (ms: number) => Promise<void>;
  /** Milliseconds since the epoch, for Retry-After dates. */
  now?: () => number;
  /** In [0, 1), for the jitter. */
  random?: () => number;
  /** New eventIds and request ids; defaults to crypto.randomUUID. */
  newId?: () => string;
}

type Query = Record<string, string | number | boolean | readonly (string | number | boolean)[] | undefined>;

export class AgentSessionClient {
  readonly #baseUrl: string;
  readonly #credential: string;
  readonly #retry: RetryPolicy;
  readonly #fetch: typeof fetch;
  readonly #sleep: (ms: number) => Promise<void>;
  readonly #now: () => number;
  readonly #random: () => number;
  readonly #newId: () => string;

  constructor(options: AgentSessionClientOptions) {
    this.#baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#credential = options.credential;
    this.#retry = { ...DEFAULT_RETRY_POLICY, ...options.retry };
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.#sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.#now = options.now ?? Date.now;
    this.#random = options.random ?? Math.random;
    this.#newId = options.newId ?? (() => globalThis.crypto.randomUUID());
  }

  // Health and metrics
  getLiveness(options?: CallOptions<'getLiveness'>): Promise<Result<'getLiveness'>> { return this.#call('getLiveness', {}, undefined, options); }
  getReadiness(options?: CallOptions<'getReadiness'>): Promise<Result<'getReadiness'>> { return this.#call('getReadiness', {}, undefined, options); }
  getMetrics(options?: CallOptions<'getMetrics'>): Promise<Result<'getMetrics'>> { return this.#call('getMetrics', {}, undefined, options); }

  // Session spaces
  createSessionSpace(body: Body<'createSessionSpace'>, options?: CallOptions<'createSessionSpace'>): Promise<Result<'createSessionSpace'>> { return this.#call('createSessionSpace', {}, body, options); }
  listSessionSpaces(params: Params<'listSessionSpaces'> = {}, options?: CallOptions<'listSessionSpaces'>): Promise<Result<'listSessionSpaces'>> { return this.#call('listSessionSpaces', params, undefined, options); }
  describeSessionSpace(params: Params<'describeSessionSpace'>, options?: CallOptions<'describeSessionSpace'>): Promise<Result<'describeSessionSpace'>> { return this.#call('describeSessionSpace', params, undefined, options); }
  modifySessionSpace(params: Params<'modifySessionSpace'>, body: Body<'modifySessionSpace'>, options?: CallOptions<'modifySessionSpace'>): Promise<Result<'modifySessionSpace'>> { return this.#call('modifySessionSpace', params, body, options); }
  deleteSessionSpace(params: Params<'deleteSessionSpace'>, options?: CallOptions<'deleteSessionSpace'>): Promise<Result<'deleteSessionSpace'>> { return this.#call('deleteSessionSpace', params, undefined, options); }
  getSpacePermissions(params: Params<'getSpacePermissions'>, options?: CallOptions<'getSpacePermissions'>): Promise<Result<'getSpacePermissions'>> { return this.#call('getSpacePermissions', params, undefined, options); }
  listSpaceUsers(params: Params<'listSpaceUsers'>, options?: CallOptions<'listSpaceUsers'>): Promise<Result<'listSpaceUsers'>> { return this.#call('listSpaceUsers', params, undefined, options); }
  getUserState(params: Params<'getUserState'>, options?: CallOptions<'getUserState'>): Promise<Result<'getUserState'>> { return this.#call('getUserState', params, undefined, options); }

  // Sessions
  createSession(params: Params<'createSession'>, body: Body<'createSession'> = {}, options?: CallOptions<'createSession'>): Promise<Result<'createSession'>> { return this.#call('createSession', params, body, options); }
  listSessions(params: Params<'listSessions'>, options?: CallOptions<'listSessions'>): Promise<Result<'listSessions'>> { return this.#call('listSessions', params, undefined, options); }
  listSpaceSessions(params: Params<'listSpaceSessions'>, options?: CallOptions<'listSpaceSessions'>): Promise<Result<'listSpaceSessions'>> { return this.#call('listSpaceSessions', params, undefined, options); }
  describeSession(params: Params<'describeSession'>, options?: CallOptions<'describeSession'>): Promise<Result<'describeSession'>> { return this.#call('describeSession', params, undefined, options); }
  modifySession(params: Params<'modifySession'>, body: Body<'modifySession'>, options?: CallOptions<'modifySession'>): Promise<Result<'modifySession'>> { return this.#call('modifySession', params, body, options); }
  deleteSession(params: Params<'deleteSession'>, options?: CallOptions<'deleteSession'>): Promise<Result<'deleteSession'>> { return this.#call('deleteSession', params, undefined, options); }
  exportSession(params: Params<'exportSession'>, options?: CallOptions<'exportSession'>): Promise<Result<'exportSession'>> { return this.#call('exportSession', params, undefined, options); }
  importSession(params: Params<'importSession'>, body: Body<'importSession'>, options?: CallOptions<'importSession'>): Promise<Result<'importSession'>> { return this.#call('importSession', params, body, options); }
  getContext(params: Params<'getContext'>, options?: CallOptions<'getContext'>): Promise<Result<'getContext'>> { return this.#call('getContext', params, undefined, options); }
  putContext(params: Params<'putContext'>, body: Body<'putContext'>, options?: CallOptions<'putContext'>): Promise<Result<'putContext'>> { return this.#call('putContext', params, body, options); }

  // Events
  /** One event or `{ events: [...] }`. Events without an eventId get one here, so retries are safe. */
  appendEvents(params: Params<'appendEvents'>, body: Body<'appendEvents'>, options?: CallOptions<'appendEvents'>): Promise<Result<'appendEvents'>> {
    return this.#call('appendEvents', params, withEventIds(body as AppendBody, this.#newId) as Body<'appendEvents'>, options);
  }
  listEvents(params: Params<'listEvents'>, options?: CallOptions<'listEvents'>): Promise<Result<'listEvents'>> { return this.#call('listEvents', params, undefined, options); }
  describeEvent(params: Params<'describeEvent'>, options?: CallOptions<'describeEvent'>): Promise<Result<'describeEvent'>> { return this.#call('describeEvent', params, undefined, options); }
  getStateAtEvent(params: Params<'getStateAtEvent'>, options?: CallOptions<'getStateAtEvent'>): Promise<Result<'getStateAtEvent'>> { return this.#call('getStateAtEvent', params, undefined, options); }

  /**
   * The session's events after `afterSeq` (default 0), then each new one as it is appended
   * (GET …/events/stream), until the signal aborts or the session is gone. A dropped connection
   * is reopened after the retry policy's delay with Last-Event-ID, so no event is missed or repeated;
   * so is a stream the server ended at its maximum lifetime (reason StreamLifetimeExceeded, at once)
   * or for an unreachable database. An error answer (401, 403, 404), or a stream the server ended
   * because the credential or policy no longer allows it, is thrown as an AgentSessionError.
   */
  async *streamEvents(params: Params<'streamEvents'>, options: RequestOptions = {}): AsyncGenerator<components['schemas']['Event'], void, undefined> {
    const { afterSeq = 0, ...path } = params;
    let lastSeq = afterSeq;
    for (let failures = 0; !options.signal?.aborted; ) {
      const url = this.#url(OPERATIONS.streamEvents.path, path);
      const headers = { authorization: `Bearer ${this.#credential}`, accept: 'text/event-stream', 'last-event-id': String(lastSeq), 'x-request-id': options.requestId ?? this.#newId() };
      let response: Response;
      try {
        response = await this.#fetch(url, { headers, ...(options.signal ? { signal: options.signal } : {}) });
      } catch (error) {
        if (options.signal?.aborted) return;
        if (failures >= this.#retry.maxRetries) throw new AgentSessionError({ code: CLIENT_ERROR_CODES.network, status: 0, message: `GET ${url}: ${(error as Error).message}`, cause: error });
        await this.#sleep(retryDelayMs(failures++, this.#retry, undefined, this.#random));
        continue;
      }
      if (!response.ok || !response.body) {
        this.#read<'streamEvents'>(response, await response.text()); // throws the service's error
        return;
      }
      let refusal: AgentSessionError | undefined;
      let reconnectAtOnce = false;
      try {
        for await (const frame of readSseFrames(response.body)) {
          failures = 0;
          if (frame.event === 'end') {
            const reason = endReason(frame.data);
            if (reason === 'ResourceNotFound.Session') return;
            if (reason === STREAM_LIFETIME_EXCEEDED) reconnectAtOnce = true;
            else if (reason !== 'ResourceUnavailable.Database') refusal = new AgentSessionError({ code: reason, status: 0, message: `GET ${url}: the server ended the stream (${reason})` });
            break;
          }
          if (frame.event !== 'event') continue;
          const event = JSON.parse(frame.data) as components['schemas']['Event'];
          lastSeq = event.seq;
          yield event;
        }
      } catch (error) {
        if (options.signal?.aborted) return;
        if (failures >= this.#retry.maxRetries) throw new AgentSessionError({ code: CLIENT_ERROR_CODES.network, status: 0, message: `GET ${url}: ${(error as Error).message}`, cause: error });
      }
      if (refusal) throw refusal;
      // A planned end, not a failure: no back-off.
      if (reconnectAtOnce) continue;
      // The server ended the stream (a restart, say) or the connection dropped: reconnect.
      await this.#sleep(retryDelayMs(failures++, this.#retry, undefined, this.#random));
    }
  }

  // IAM
  createSubAccount(body: Body<'createSubAccount'>, options?: CallOptions<'createSubAccount'>): Promise<Result<'createSubAccount'>> { return this.#call('createSubAccount', {}, body, options); }
  listSubAccounts(params: Params<'listSubAccounts'> = {}, options?: CallOptions<'listSubAccounts'>): Promise<Result<'listSubAccounts'>> { return this.#call('listSubAccounts', params, undefined, options); }
  describeSubAccount(params: Params<'describeSubAccount'>, options?: CallOptions<'describeSubAccount'>): Promise<Result<'describeSubAccount'>> { return this.#call('describeSubAccount', params, undefined, options); }
  deleteSubAccount(params: Params<'deleteSubAccount'>, options?: CallOptions<'deleteSubAccount'>): Promise<Result<'deleteSubAccount'>> { return this.#call('deleteSubAccount', params, undefined, options); }
  putSubAccountPolicy(params: Params<'putSubAccountPolicy'>, body: Body<'putSubAccountPolicy'>, options?: CallOptions<'putSubAccountPolicy'>): Promise<Result<'putSubAccountPolicy'>> { return this.#call('putSubAccountPolicy', params, body, options); }
  getSubAccountPolicy(params: Params<'getSubAccountPolicy'>, options?: CallOptions<'getSubAccountPolicy'>): Promise<Result<'getSubAccountPolicy'>> { return this.#call('getSubAccountPolicy', params, undefined, options); }
  createSubAccountCredential(params: Params<'createSubAccountCredential'>, options?: CallOptions<'createSubAccountCredential'>): Promise<Result<'createSubAccountCredential'>> { return this.#call('createSubAccountCredential', params, undefined, options); }
  listSubAccountCredentials(params: Params<'listSubAccountCredentials'>, options?: CallOptions<'listSubAccountCredentials'>): Promise<Result<'listSubAccountCredentials'>> { return this.#call('listSubAccountCredentials', params, undefined, options); }
  createRootCredential(options?: CallOptions<'createRootCredential'>): Promise<Result<'createRootCredential'>> { return this.#call('createRootCredential', {}, undefined, options); }
  listRootCredentials(options?: CallOptions<'listRootCredentials'>): Promise<Result<'listRootCredentials'>> { return this.#call('listRootCredentials', {}, undefined, options); }
  modifyCredential(params: Params<'modifyCredential'>, body: Body<'modifyCredential'>, options?: CallOptions<'modifyCredential'>): Promise<Result<'modifyCredential'>> { return this.#call('modifyCredential', params, body, options); }
  deleteCredential(params: Params<'deleteCredential'>, options?: CallOptions<'deleteCredential'>): Promise<Result<'deleteCredential'>> { return this.#call('deleteCredential', params, undefined, options); }

  // Every paged list, item by item, following nextPageToken.
  iterateSessionSpaces(params: Params<'listSessionSpaces'> = {}, options?: RequestOptions): AsyncGenerator<PageItem<'listSessionSpaces', 'spaces'>, void, undefined> { return this.#iterate('listSessionSpaces', 'spaces', params, options); }
  iterateSpaceUsers(params: Params<'listSpaceUsers'>, options?: RequestOptions): AsyncGenerator<PageItem<'listSpaceUsers', 'users'>, void, undefined> { return this.#iterate('listSpaceUsers', 'users', params, options); }
  iterateSessions(params: Params<'listSessions'>, options?: RequestOptions): AsyncGenerator<PageItem<'listSessions', 'sessions'>, void, undefined> { return this.#iterate('listSessions', 'sessions', params, options); }
  iterateSpaceSessions(params: Params<'listSpaceSessions'>, options?: RequestOptions): AsyncGenerator<PageItem<'listSpaceSessions', 'sessions'>, void, undefined> { return this.#iterate('listSpaceSessions', 'sessions', params, options); }
  iterateEvents(params: Params<'listEvents'>, options?: RequestOptions): AsyncGenerator<PageItem<'listEvents', 'events'>, void, undefined> { return this.#iterate('listEvents', 'events', params, options); }
  iterateSubAccounts(params: Params<'listSubAccounts'> = {}, options?: RequestOptions): AsyncGenerator<PageItem<'listSubAccounts', 'subAccounts'>, void, undefined> { return this.#iterate('listSubAccounts', 'subAccounts', params, options); }

  async *#iterate<K extends PagedOperationId, F extends keyof Result<K> & string>(
    id: K,
    field: F,
    params: Params<K>,
    options: RequestOptions | undefined,
  ): AsyncGenerator<PageItem<K, F>, void, undefined> {
    let pageToken: string | undefined = (params as { pageToken?: string }).pageToken;
    do {
      const page = (await this.#call(id, { ...params, ...(pageToken === undefined ? {} : { pageToken }) }, undefined, options)) as Result<K>;
      yield* page[field] as Iterable<PageItem<K, F>>;
      pageToken = (page as { nextPageToken?: string }).nextPageToken;
    } while (pageToken !== undefined);
  }

  async #call<K extends OperationId>(id: K, params: object, body: unknown, options: CallOptions<K> | undefined): Promise<Result<K>> {
    const { method, path } = OPERATIONS[id];
    const url = this.#url(path, params as Record<string, unknown>);
    const call = (options ?? {}) as RequestOptions & { ifMatch?: string; ifNoneMatch?: string };
    const requestId = call.requestId ?? this.#newId();
    const headers: Record<string, string> = { authorization: `Bearer ${this.#credential}`, accept: 'application/json', 'x-request-id': requestId };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (call.ifMatch !== undefined) headers['if-match'] = call.ifMatch;
    if (call.ifNoneMatch !== undefined) headers['if-none-match'] = call.ifNoneMatch;
    const init: RequestInit = { method, headers, ...(body === undefined ? {} : { body: JSON.stringify(body) }), ...(call.signal ? { signal: call.signal } : {}) };
    const repeatable = repeatableAfterLostAnswer(id, method, body, call.ifMatch !== undefined || call.ifNoneMatch !== undefined);
    // Set once an attempt may have reached the server and done the work without its answer arriving.
    let answerLost = false;

    for (let retry = 0; ; retry += 1) {
      let response: Response;
      try {
        response = await this.#fetch(url, init);
      } catch (error) {
        if (call.signal?.aborted) throw error;
        const unsent = neverSent(error);
        if (!(unsent || repeatable) || retry >= this.#retry.maxRetries) {
          throw new AgentSessionError({ code: CLIENT_ERROR_CODES.network, status: 0, message: `${method} ${url}: ${(error as Error).message}`, requestId, cause: error });
        }
        answerLost ||= !unsent;
        await this.#sleep(retryDelayMs(retry, this.#retry, undefined, this.#random));
        continue;
      }
      if (isRetryableStatus(response.status) && retry < this.#retry.maxRetries) {
        await response.body?.cancel();
        await this.#sleep(retryDelayMs(retry, this.#retry, parseRetryAfterMs(response.headers.get('retry-after'), this.#now()), this.#random));
        continue;
      }
      let text: string;
      try {
        text = await response.text();
      } catch (error) {
        // The answer began and was cut off (the connection reset mid-body): the server ran the call
        // and its answer is lost, the same case as a network error after sending.
        if (call.signal?.aborted) throw error;
        if (!repeatable || retry >= this.#retry.maxRetries) {
          throw new AgentSessionError({ code: CLIENT_ERROR_CODES.network, status: response.status, message: `${method} ${url}: the answer (HTTP ${response.status}) was cut off: ${(error as Error).message}`, requestId, cause: error });
        }
        answerLost = true;
        await this.#sleep(retryDelayMs(retry, this.#retry, undefined, this.#random));
        continue;
      }
      try {
        return this.#read<K>(response, text);
      } catch (error) {
        // The attempt whose answer was lost may have been the one that deleted it: gone is what was asked.
        if (answerLost && error instanceof AgentSessionError && isNotFoundOfDelete(id, error.code)) return undefined as Result<K>;
        throw error;
      }
    }
  }

  /** The answer's result, or its error as an AgentSessionError; `text` is its body, read already. */
  #read<K extends OperationId>(response: Response, text: string): Result<K> {
    const isJson = (response.headers.get('content-type') ?? '').startsWith('application/json');
    let content: unknown = text === '' ? undefined : text;
    if (isJson && text !== '') {
      try {
        content = JSON.parse(text);
      } catch {
        content = text;
      }
    }
    if (!response.ok) throw errorFromResponse(response.status, content, response.headers.get('x-request-id'));
    const etag = response.headers.get('etag');
    if (etag !== null && typeof content === 'object' && content !== null) return { ...content, etag } as Result<K>;
    return content as Result<K>;
  }

  #url(template: string, params: Record<string, unknown>): string {
    const query = new URLSearchParams();
    const path = template.replace(/\{(\w+)\}/g, (_, name: string) => pathSegment(name, params[name]));
    const used = new Set([...template.matchAll(/\{(\w+)\}/g)].map((match) => match[1]));
    for (const [name, value] of Object.entries(params as Query)) {
      if (used.has(name) || value === undefined) continue;
      for (const item of Array.isArray(value) ? value : [value]) query.append(name, String(item));
    }
    const search = query.toString();
    return `${this.#baseUrl}${path}${search === '' ? '' : `?${search}`}`;
  }
}

type PagedOperationId = 'listSessionSpaces' | 'listSpaceUsers' | 'listSessions' | 'listSpaceSessions' | 'listEvents' | 'listSubAccounts';

/** The reason the server gave in a stream's `event: end` frame (unknown when the data is not the expected JSON). */
function endReason(data: string): string {
  try {
    const reason = (JSON.parse(data) as { reason?: unknown }).reason;
    return typeof reason === 'string' ? reason : 'Unknown';
  } catch {
    return 'Unknown';
  }
}

/** The end reason of a stream that lived its maximum lifetime: reconnect with Last-Event-ID. */
const STREAM_LIFETIME_EXCEEDED = 'StreamLifetimeExceeded';
