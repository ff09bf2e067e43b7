import { z } from 'zod';
import { pingDatabase } from '../../db/ping.js';
import { AppError } from '../../errors.js';
import { ErrorBody } from '../../http/schemas.js';
import type { AppDeps, ZodApp } from '../../http/zod-app.js';

const READINESS_TIMEOUT_MS = 2_000;

export async function healthRoutes(app: ZodApp, { db }: AppDeps): Promise<void> {
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
      try {
        await pingDatabase(db, READINESS_TIMEOUT_MS);
      } catch (error) {
        throw new AppError('ResourceUnavailable.Database', 'The database is not reachable.', { headers: { 'retry-after': '2' }, cause: error });
      }
      return { status: 'ready' as const };
    },
  );
}
