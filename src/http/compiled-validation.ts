// Request validation through compiled schemas (lib/compiled-schema.ts): every route's body, query,
// path and header schemas. The server's CPU per single-event append fell by 4–11 % with it, per
// batch of 10 events by 13–16 % (issue 24, bench/README.md).
import type { FastifySchemaCompiler } from 'fastify';
import { validatorCompiler } from 'fastify-type-provider-zod';
import type { z } from 'zod';
import { compiledSchema } from '../lib/compiled-schema.js';

/** fastify-type-provider-zod's validator compiler, over the compiled schema. */
export const compiledValidatorCompiler: FastifySchemaCompiler<z.ZodType> = (route) => validatorCompiler({ ...route, schema: compiledSchema(route.schema) });
