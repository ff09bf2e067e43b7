// The /v1 API: one line per feature module.
import type { AppDeps, ZodApp } from './http/zod-app.js';
import { contextRoutes } from './modules/context/index.js';
import { eventStreamRoutes, type AppendDeps, eventsRoutes, stateHistoryRoutes } from './modules/events/index.js';
import { iamRoutes } from './modules/iam/index.js';
import { sessionsRoutes } from './modules/sessions/index.js';
import { spacesRoutes } from './modules/spaces/index.js';
import { transferRoutes } from './modules/transfer/index.js';
import { usersRoutes } from './modules/users/index.js';

export async function v1Routes(app: ZodApp, deps: AppDeps & AppendDeps): Promise<void> {
  await spacesRoutes(app, deps);
  await usersRoutes(app, deps);
  await sessionsRoutes(app, deps);
  await eventsRoutes(app, deps);
  await eventStreamRoutes(app, deps);
  await stateHistoryRoutes(app, deps);
  await transferRoutes(app, deps);
  await contextRoutes(app);
  await iamRoutes(app, deps);
}
