// A body nested deeper than this is refused before validation: zod walks JSON recursively and a
// few thousand levels would overflow the stack, turning hostile input into a 500.
import type { FastifyInstance } from 'fastify';
import { invalidParameter } from '../errors.js';
import { MAX_BODY_NESTING, jsonDepth } from '../lib/json-measure.js';

export { MAX_BODY_NESTING } from '../lib/json-measure.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A route's own nesting limit, where its body wraps values other requests nest up to MAX_BODY_NESTING (the import). */
    bodyNesting?: number;
  }
}

export function registerBodyNestingLimit(app: FastifyInstance): void {
  // A callback hook, not an async one: no promise per request (request-logging.ts).
  app.addHook('preValidation', (request, _reply, done) => {
    const limit = request.routeOptions.config.bodyNesting ?? MAX_BODY_NESTING;
    if (request.body !== undefined && jsonDepth(request.body) > limit) {
      return done(invalidParameter('body', `is nested deeper than ${limit} levels`));
    }
    done();
  });
}
