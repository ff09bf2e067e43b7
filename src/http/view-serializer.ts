// The serializer of the read routes that answer many events (a page of events, a context window).
// The application-wide one (fastify-type-provider-zod) encodes every answer through its zod schema
// before JSON.stringify; for 100 events that walk costs 1.6–1.9 ms, ten times the JSON.stringify
// and more than the database reads of the request (bench/read.ts). These answers are built field by
// field by the typed view functions (toEventView, toSessionView, whose types are z.infer of the same
// schemas) from rows whose JSON was validated when it was written, so the check finds nothing the
// compiler has not; the schemas still describe the answer in the OpenAPI document.
import type { FastifySerializerCompiler } from 'fastify';

export const viewSerializerCompiler: FastifySerializerCompiler<unknown> = () => (data: unknown) => JSON.stringify(data);
