import type { AppDeps, ZodApp } from '../../http/zod-app.js';

export async function eventsRoutes(_app: ZodApp, _deps: AppDeps): Promise<void> {}
