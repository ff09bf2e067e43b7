// The twelve Session actions of ags 2025-09-20, by name, and the dispatch of one request to its
// action: model validation, the same authorization as the REST routes, then the service.
import { AppError } from '../../errors.js';
import { appendEventAction, describeEventsAction } from './event-actions.js';
import { createSessionAction, deleteSessionAction, describeSessionAction, describeSessionsAction, modifySessionAction } from './session-actions.js';
import { createSessionSpace, deleteSessionSpace, describeSessionSpace, describeSessionSpaces, modifySessionSpace } from './space-actions.js';
import type { Tc3Action, Tc3Context } from './tc3-action.js';
import { Tc3Error, fromAppError } from './tc3-errors.js';
import { parseModel, withoutNulls } from './tc3-validation.js';

export const TC3_VERSION = '2025-09-20';

export const TC3_ACTIONS: Readonly<Record<string, Tc3Action>> = {
  CreateSessionSpace: createSessionSpace,
  DescribeSessionSpace: describeSessionSpace,
  DescribeSessionSpaces: describeSessionSpaces,
  ModifySessionSpace: modifySessionSpace,
  DeleteSessionSpace: deleteSessionSpace,
  CreateSession: createSessionAction,
  DescribeSession: describeSessionAction,
  DescribeSessions: describeSessionsAction,
  ModifySession: modifySessionAction,
  DeleteSession: deleteSessionAction,
  AppendEvent: appendEventAction,
  DescribeEvents: describeEventsAction,
};

/** The action's response fields (without RequestId), or a Tc3Error. */
export async function dispatchAction(context: Tc3Context, name: string | undefined, version: string | undefined, body: unknown): Promise<Record<string, unknown>> {
  if (!name) throw new Tc3Error('MissingParameter', 'X-TC-Action: the header naming the action is missing.');
  const action = Object.hasOwn(TC3_ACTIONS, name) ? TC3_ACTIONS[name] : undefined;
  if (!action) throw new Tc3Error('InvalidAction', `X-TC-Action: ${JSON.stringify(name.slice(0, 64))} is not an action of ags ${TC3_VERSION}.`);
  if (version !== TC3_VERSION) {
    throw new Tc3Error(version ? 'NoSuchVersion' : 'MissingParameter', `X-TC-Version: must be ${TC3_VERSION}${version ? `, not ${JSON.stringify(version.slice(0, 32))}` : ''}.`);
  }
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new Tc3Error('InvalidParameter', 'The body must be a JSON object of the action\'s parameters.');
  const input = parseModel(action.request, withoutNulls(body));
  try {
    const spaceId = action.spaceIdOf?.(input);
    await context.authorize(action.permission.action, action.permission.scope, spaceId);
    return await action.run(context, input);
  } catch (error) {
    if (error instanceof AppError) throw fromAppError(error, action.sessionNotFound);
    throw error;
  }
}
