// AdkSessionService: Google ADK's BaseSessionService backed by the agent session service, so a
// Runner on any instance continues any session. The mapping (docs/adk.md has the details and
// where ADK's own implementations disagree):
//   appName   → a space: `spaces[appName]` if given, else the space named appName (created on
//               first use with onNameExists: reuse, so racing processes end with one space);
//   userId, sessionId → the same ids; one no URL path can carry ("", "." or "..") is refused
//               before any request, space lookup included, with the client's 400 InvalidParameter;
//   Event     → the service's event (adk-event-codec.ts);
//   state     → the service's merged state: `user:` / `app:` keys are its user and space scopes,
//               `temp:` keys are never stored.
import { BaseSessionService, type Event, type ListSessionsResponse, type Session } from '@google/adk';
import { decodeAdkEvent, encodeAdkEvent } from './adk-event-codec.js';
import { AgentSessionClient, type AgentSessionClientOptions } from './client.js';
import { AgentSessionError } from './errors.js';
import { assertPathSegments } from './path-segments.js';
import type { Body, Params, Result } from './types.js';

type CreateSessionRequest = Parameters<BaseSessionService['createSession']>[0];
type GetSessionRequest = Parameters<BaseSessionService['getSession']>[0];
type ListSessionsRequest = Parameters<BaseSessionService['listSessions']>[0];
type DeleteSessionRequest = Parameters<BaseSessionService['deleteSession']>[0];
type AppendEventRequest = Parameters<BaseSessionService['appendEvent']>[0];
type ServiceSession = Result<'listSessions'>['sessions'][number];

export interface AdkSessionServiceOptions extends AgentSessionClientOptions {
  /** appName → spaceId, for apps whose space is chosen rather than found by name. */
  spaces?: Record<string, string>;
}

const SESSION_PAGE = 100; // the service's largest session page
const EVENT_PAGE = 200; // the service's largest event page
const SPACE_NAME_MAX = 128;

export class AdkSessionService extends BaseSessionService {
  readonly #client: AgentSessionClient;
  readonly #newId: () => string;
  /** appName → its spaceId, resolved once per process (a failed lookup is forgotten and tried again). */
  readonly #spaces = new Map<string, Promise<string>>();

  constructor(options: AdkSessionServiceOptions) {
    super();
    const { spaces, ...clientOptions } = options;
    this.#client = new AgentSessionClient(clientOptions);
    this.#newId = options.newId ?? (() => globalThis.crypto.randomUUID());
    for (const [appName, spaceId] of Object.entries(spaces ?? {})) this.#spaces.set(appName, Promise.resolve(spaceId));
  }

  /** The typed client this service talks through, for what ADK has no method for (export, context, IAM…). */
  get client(): AgentSessionClient {
    return this.#client;
  }

  /** The spaceId of an app: from the `spaces` option, or the space named appName, created if there is none. */
  spaceIdOf(appName: string): Promise<string> {
    let spaceId = this.#spaces.get(appName);
    if (spaceId === undefined) {
      if (appName.length === 0 || appName.length > SPACE_NAME_MAX || appName !== appName.trim()) {
        return Promise.reject(new Error(`appName ${JSON.stringify(appName)} cannot name a space: it must be 1–${SPACE_NAME_MAX} characters without leading or trailing whitespace (or map it with the spaces option).`));
      }
      spaceId = this.#client.createSessionSpace({ name: appName, onNameExists: 'reuse' }).then((space) => space.spaceId);
      this.#spaces.set(appName, spaceId);
      spaceId.catch(() => this.#spaces.delete(appName));
    }
    return spaceId;
  }

  /** Rejects when the id is taken (the service would answer 200 with the existing one; ADK wants an error). */
  override async createSession({ appName, userId, state, sessionId }: CreateSessionRequest): Promise<Session> {
    assertPathSegments({ userId, ...(sessionId === undefined ? {} : { sessionId }) });
    const spaceId = await this.spaceIdOf(appName);
    const id = sessionId ?? this.#newId(); // chosen here, so that a retried create cannot make two
    const initial = state === undefined ? undefined : withoutTempKeys(state);
    try {
      const created = await this.#client.createSession({ spaceId, userId }, { sessionId: id, ...(initial ? { state: initial as NonNullable<Body<'createSession'>['state']> } : {}) }, { ifNoneMatch: '*' });
      return toAdkSession(appName, created, []);
    } catch (error) {
      if (error instanceof AgentSessionError && error.code === 'FailedOperation.PreconditionFailed') {
        throw new AgentSessionError({ code: 'ResourceInUse.SessionExists', status: error.status, requestId: error.requestId, message: `Session ${id} already exists for user ${userId} in app ${appName}.`, cause: error });
      }
      throw error;
    }
  }

  /**
   * The session with its merged state and events in seq order. numRecentEvents and afterTimestamp
   * go to the server (order=desc with a page size, and `after`), so only the events asked for travel.
   */
  override async getSession({ appName, userId, sessionId, config }: GetSessionRequest): Promise<Session | undefined> {
    assertPathSegments({ userId, sessionId });
    const where = { spaceId: await this.spaceIdOf(appName), userId, sessionId };
    try {
      const [session, events] = await Promise.all([this.#client.describeSession(where), this.#events(where, config ?? {})]);
      return toAdkSession(appName, session, events);
    } catch (error) {
      if (error instanceof AgentSessionError && error.code === 'ResourceNotFound.Session') return undefined;
      throw error;
    }
  }

  async #events(where: Params<'listEvents'>, config: NonNullable<GetSessionRequest['config']>): Promise<Event[]> {
    // ADK ignores a numRecentEvents or afterTimestamp of 0 (both implementations test truthiness).
    const recent = config.numRecentEvents !== undefined && Number.isInteger(config.numRecentEvents) && config.numRecentEvents > 0 ? config.numRecentEvents : undefined;
    const after = config.afterTimestamp ? config.afterTimestamp : undefined;
    const params: Params<'listEvents'> = { ...where, order: recent ? 'desc' : 'asc', pageSize: Math.min(recent ?? EVENT_PAGE, EVENT_PAGE) };
    // The service's `after` is exclusive, at millisecond precision: from the millisecond of
    // afterTimestamp on, and the events of that one millisecond are compared exactly here.
    if (after !== undefined) params.after = new Date(Math.max(0, Math.floor(after) - 1)).toISOString();
    const events: Event[] = [];
    for await (const stored of this.#client.iterateEvents(params)) {
      const event = decodeAdkEvent(stored);
      if (after !== undefined && event.timestamp < after) continue;
      events.push(event);
      if (events.length === recent) break;
    }
    return recent ? events.reverse() : events;
  }

  /**
   * Sessions of one user (or of every user without userId), with merged state and no events,
   * ordered by lastUpdateTime as ADK's `order` asks (newest first when it does not). `limit` with
   * `page` or `offset` pages the way ADK's implementations do; totalItems is the server's count.
   */
  override async listSessions({ appName, userId, limit, offset, page, order }: ListSessionsRequest): Promise<ListSessionsResponse> {
    if (userId !== undefined) assertPathSegments({ userId });
    const spaceId = await this.spaceIdOf(appName);
    const query = { orderBy: 'updateTime' as const, order: order ?? 'desc' };
    const listPage = (pageToken: string | undefined, pageSize: number, includeTotal: boolean) => {
      const paging = { pageSize, ...(pageToken ? { pageToken } : {}), ...(includeTotal ? { includeTotal: 'true' as const } : {}) };
      return userId === undefined
        ? this.#client.listSpaceSessions({ spaceId, ...query, ...paging })
        : this.#client.listSessions({ spaceId, userId, ...query, ...paging });
    };

    if (limit === undefined) {
      const all: ServiceSession[] = [];
      let pageToken: string | undefined;
      do {
        const result = await listPage(pageToken, SESSION_PAGE, false);
        all.push(...result.sessions);
        pageToken = result.nextPageToken;
      } while (pageToken !== undefined);
      const totalItems = all.length;
      const sessions = all.slice(offset ?? 0).map((session) => toAdkSession(appName, session, []));
      return { sessions, page: 1, limit: totalItems, totalItems, totalPages: totalItems === 0 ? 0 : 1 };
    }

    const skip = page !== undefined ? (page - 1) * limit : (offset ?? 0);
    const effectivePage = page !== undefined ? page : limit === 0 ? 1 : Math.floor(skip / limit) + 1;
    const wanted: ServiceSession[] = [];
    let seen = 0;
    let totalItems = 0;
    let pageToken: string | undefined;
    let first = true;
    do {
      const result = await listPage(pageToken, SESSION_PAGE, first);
      if (first) totalItems = result.totalCount ?? 0;
      first = false;
      for (const session of result.sessions) {
        if (seen++ >= skip && wanted.length < limit) wanted.push(session);
      }
      pageToken = wanted.length < limit ? result.nextPageToken : undefined;
    } while (pageToken !== undefined && limit > 0);
    return {
      sessions: wanted.map((session) => toAdkSession(appName, session, [])),
      page: effectivePage,
      limit,
      totalItems,
      totalPages: limit === 0 ? 0 : Math.ceil(totalItems / limit),
    };
  }

  /** Deletes the session and its events; a session that is not there is not an error (as in ADK). */
  override async deleteSession({ appName, userId, sessionId }: DeleteSessionRequest): Promise<void> {
    assertPathSegments({ userId, sessionId });
    const spaceId = await this.spaceIdOf(appName);
    try {
      await this.#client.deleteSession({ spaceId, userId, sessionId });
    } catch (error) {
      if (error instanceof AgentSessionError && error.code === 'ResourceNotFound.Session') return;
      throw error;
    }
  }

  /**
   * Stores the event (not a partial one) and then updates the caller's Session as ADK's base class
   * does: temp: keys trimmed from the event, its delta applied to session.state, the event pushed.
   * Appends from several processes are serialized by the service; seq is their order. A missing
   * session rejects with ResourceNotFound.Session and leaves the caller's Session as it was.
   */
  override async appendEvent({ session, event }: AppendEventRequest): Promise<Event> {
    if (event.partial) return event;
    assertPathSegments({ userId: session.userId, sessionId: session.id });
    if (!event.id) event.id = this.#newId();
    const spaceId = await this.spaceIdOf(session.appName);
    const result = await this.#client.appendEvents({ spaceId, userId: session.userId, sessionId: session.id }, encodeAdkEvent(event));
    await super.appendEvent({ session, event });
    session.lastUpdateTime = Date.parse(result.session.updateTime);
    return event;
  }
}

/** What every session answer carries (a write's answer has state only if the caller may describe sessions). */
interface SessionFields {
  sessionId: string;
  userId: string;
  state?: Record<string, unknown>;
  updateTime: string;
}

function toAdkSession(appName: string, session: SessionFields, events: Event[]): Session {
  return {
    id: session.sessionId,
    appName,
    userId: session.userId,
    state: { ...session.state },
    events,
    lastUpdateTime: Date.parse(session.updateTime),
  };
}

function withoutTempKeys(state: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(state).filter(([key]) => !key.startsWith('temp:')));
}
