// A body nested deeper than this is refused before validation: zod walks JSON recursively and a
// few thousand levels would overflow the stack, turning hostile input into a 500.
import type { FastifyInstance } from 'fastify';
import { invalidParameter } from '../errors.js';
import { jsonDepth } from '../lib/json-measure.js';

export const MAX_BODY_NESTING = 256;

export function registerBodyNestingLimit(app: FastifyInstance): void {
  app.addHook('preValidation', async (request) => {
    if (request.body !== undefined && jsonDepth(request.body) > MAX_BODY_NESTING) {
      throw invalidParameter('body', `is nested deeper than ${MAX_BODY_NESTING} levels`);
    }
  });
}
