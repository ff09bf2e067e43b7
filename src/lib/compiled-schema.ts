// Zod schemas compiled (z.compile, zod 4.6): a generated function per schema checks a value in one
// pass, and only a value it refuses goes through zod's runtime parser, so every refusal names the
// same issues, word for word. The append's body (one event) is checked in 0.3 µs instead of 1.2
// (2.4 while JsonValue was a recursive schema, which the compiler refuses: http/schemas.ts); issue
// 24, bench/README.md. A schema the compiler cannot model (a coercion, a transform) is answered as
// it is and parsed by the runtime, as before.
//
// For parsing only: encoding (z.encode, the answers' serializer) does not take the compiled path.
import { z } from 'zod';

// Route and model schemas are module constants shared by every app a process builds (the tests
// build many): each is compiled once.
const compiled = new WeakMap<z.ZodType, z.ZodType>();

/**
 * `schema` compiled (or itself, where the compiler cannot model it), once per schema object. For
 * schemas built once (module constants, or once per app): compiling one takes 0.5–1 ms, a thousand
 * of the checks it speeds up, so a schema built per request must not come here.
 */
export function compiledSchema<T extends z.ZodType>(schema: T): T {
  let clone = compiled.get(schema);
  if (!clone) {
    clone = z.compile(schema);
    compiled.set(schema, clone);
  }
  return clone as T;
}
