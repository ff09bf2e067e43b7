import type { IncomingMessage, ServerResponse } from 'node:http';
import type { FastifyBaseLogger, FastifyInstance, RawServerDefault } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import type { Limits } from '../config.js';
import type { Database } from '../db/connect.js';
import type { EventFeed } from '../db/event-feed.js';
import type { AppMetrics } from '../lib/metrics-registry.js';
import type { PageTokens } from '../lib/page-token.js';
import type { AccountSlots } from '../lib/account-slots.js';
import type { EventStreams } from '../lib/event-streams.js';

/** A Fastify instance whose route schemas are zod schemas. */
export type ZodApp = FastifyInstance<RawServerDefault, IncomingMessage, ServerResponse, FastifyBaseLogger, ZodTypeProvider>;

/** What route modules need: the database, the configured limits and the metrics. */
export interface AppDeps {
  /**
   * The database for work of no account (readiness, authentication): it keeps to no account's share
   * of the pool. A route's handlers use request.db, their account's (http/account-database.ts).
   */
  noAccountDb: Database;
  limits: Limits;
  /** Encrypts the stored copy of new secret keys; none is stored without it. */
  credentialMasterKey?: Buffer | undefined;
  /** Signs and checks the lists' page tokens under the server's key. */
  pageTokens: PageTokens;
  /**
   * The expensive requests' slots: at most limits.listConcurrency of them (session lists, state at
   * event N, export and import, appends with a large delta) query at once per instance, through
   * either face (REST, API 3.0), and at most limits.expensivePerAccount for one account, so that
   * they never hold every connection appends need, nor one account every slot.
   */
  expensiveSlots: AccountSlots;
  /** The exports open at once: limits.listConcurrency per instance, limits.exportsPerAccount per account. */
  exportSlots: AccountSlots;
  /** This app's Prometheus instruments (GET /metrics). */
  metrics: AppMetrics;
  /**
   * Resolves once this instance's credential cache has applied every change committed so far. IAM
   * writes wait for it before answering, so that on the instance that made a change it holds at
   * once (other instances follow within the notification's delivery time).
   */
  credentialChangesApplied: () => Promise<void>;
  /** This instance's feed of appends, for the event streams (GET …/events/stream). */
  eventFeed: EventFeed;
  /** The instance's open event streams (GET …/events/stream): their caps, shared reads and heartbeats. */
  eventStreams: EventStreams;
}
