import { z } from 'zod';
import { ErrorBody } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';
import { checkReadiness } from './health.service.js';

export async function healthRoutes(app: ZodApp, { noAccountDb: db }: AppDeps): Promise<void> {
  app.get(
    '/healthz',
    { schema: { tags: ['health'], security: [], summary: 'Liveness: the process is up', operationId: 'getLiveness', response: { 200: z.object({ status: z.literal('ok') }) } } },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['health'],
        security: [],
        summary: 'Readiness: the database answers',
        operationId: 'getReadiness',
        response: { 200: z.object({ status: z.literal('ready') }), 503: ErrorBody },
      },
    },
    async () => {
      await checkReadiness(db);
      return { status: 'ready' as const };
    },
  );
}
