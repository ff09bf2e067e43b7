// What every API 3.0 action declares: its request model, the permission it needs (the same
// policy actions and resources as the REST routes, http/authorization.ts), the spelling of a
// missing session, and how it calls the service and builds the response model.
import type { z } from 'zod';
import type { Limits } from '../../config.js';
import type { Database } from '../../db/connect.js';
import type { ResourceScope } from '../../http/authorization.js';
import type { AppMetrics } from '../../lib/metrics-registry.js';
import type { PageTokens } from '../../lib/page-token.js';
import type { Action } from '../../lib/policy.js';
import type { Principal } from '../../lib/principal.js';
import type { AccountSlots } from '../../lib/account-slots.js';
import type { AppendPath } from '../events/index.js';
import type { EventFeed } from '../../db/event-feed.js';
import type { SessionNotFoundCode } from './tc3-errors.js';

export interface Tc3Context {
  db: Database;
  limits: Limits;
  pageTokens: PageTokens;
  metrics: AppMetrics;
  /** The expensive requests' slots, shared with the REST routes (AppDeps.expensiveSlots). */
  expensiveSlots: AccountSlots;
  /** The instance's feed of appends, shared with the REST routes (AppDeps.eventFeed). */
  eventFeed: EventFeed;
  /** The instance's append path, shared with the REST routes (AppDeps.appendPath). */
  appendPath: AppendPath;
  principal: Principal;
  /**
   * The REST routes' authorization of the principal for an action on the account or one space
   * (src/http/authorization.ts), bound by tc3.routes.ts: the action table runs it before each action.
   */
  authorize(action: Action, scope: Exclude<ResourceScope, 'account'>, spaceId: string | undefined): Promise<void>;
}

export interface Tc3Action<S extends z.ZodType = z.ZodType> {
  request: S;
  permission: { action: Action; scope: Exclude<ResourceScope, 'account'> };
  /** Where the request names its space (every action but CreateSessionSpace and DescribeSessionSpaces). */
  spaceIdOf?: (input: z.output<S>) => string;
  sessionNotFound?: SessionNotFoundCode;
  /** The response fields, without RequestId. */
  run(context: Tc3Context, input: z.output<S>): Promise<Record<string, unknown>>;
}

/** Keeps each action's input type tied to its own request model. */
export const defineAction = <S extends z.ZodType>(action: Tc3Action<S>): Tc3Action => action as unknown as Tc3Action;
