// The /v1 API: one line per feature module.
import type { AppDeps, ZodApp } from './http/zod-app.js';
import { contextRoutes } from './modules/context/context.routes.js';
import { eventStreamRoutes } from './modules/events/event-stream.routes.js';
import type { AppendDeps } from './modules/events/append.service.js';
import { eventsRoutes } from './modules/events/events.routes.js';
import { iamRoutes } from './modules/iam/iam.routes.js';
import { sessionsRoutes } from './modules/sessions/sessions.routes.js';
import { stateHistoryRoutes } from './modules/events/state-history.routes.js';
import { spacesRoutes } from './modules/spaces/spaces.routes.js';
import { transferRoutes } from './modules/transfer/transfer.routes.js';
import { usersRoutes } from './modules/users/users.routes.js';

export async function v1Routes(app: ZodApp, deps: AppDeps & AppendDeps): Promise<void> {
  await spacesRoutes(app, deps);
  await usersRoutes(app, deps);
  await sessionsRoutes(app, deps);
  await eventsRoutes(app, deps);
  await eventStreamRoutes(app, deps);
  await stateHistoryRoutes(app, deps);
  await transferRoutes(app, deps);
  await contextRoutes(app, deps);
  await iamRoutes(app, deps);
}
