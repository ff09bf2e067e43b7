// A body nested deeper than this is refused before validation: zod walks JSON recursively and a
// few thousand levels would overflow the stack, turning hostile input into a 500.
import type { FastifyInstance } from 'fastify';
import { invalidParameter } from '../errors.js';
import { jsonDepth } from '../lib/json-measure.js';

export const MAX_BODY_NESTING = 256;

export function registerBodyNestingLimit(app: FastifyInstance): void {
  // A callback hook, not an async one: no promise per request (request-logging.ts).
  app.addHook('preValidation', (request, _reply, done) => {
    if (request.body !== undefined && jsonDepth(request.body) > MAX_BODY_NESTING) {
      return done(invalidParameter('body', `is nested deeper than ${MAX_BODY_NESTING} levels`));
    }
    done();
  });
}
