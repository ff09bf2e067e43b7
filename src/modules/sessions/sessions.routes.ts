import type { AppDeps, ZodApp } from '../../http/zod-app.js';

export async function sessionsRoutes(_app: ZodApp, _deps: AppDeps): Promise<void> {}
