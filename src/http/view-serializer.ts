// How the read routes avoid re-encoding their answers.
//
// The application-wide serializer (fastify-type-provider-zod) encodes every answer through its zod
// schema before JSON.stringify; for 100 events that walk costs 1.6–1.9 ms, ten times the
// JSON.stringify and more than the database reads of the request (bench/read.ts).
//
// - viewSerializerCompiler: for answers built field by field by the typed view functions
//   (toEventView, toSessionView, whose types are z.infer of the same schemas) from rows whose JSON
//   was validated when it was written: the check finds nothing the compiler has not.
// - sendJsonText: for answers PostgreSQL wrote as JSON text in the schema's shape (describe, the
//   context read): sent as they are, neither parsed nor serialized. Fastify hands a string with a
//   JSON content type straight to onSend, past the route's serializer.
// - sendJsonPieces: the same for answers of many such texts (the session and event lists), which may be
//   megabytes: a large one goes out piece by piece.
// Either way the route keeps its zod response schema: it still describes the answer in the OpenAPI
// document, and error answers still go through the route's serializer.
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifySerializerCompiler } from 'fastify';

export const viewSerializerCompiler: FastifySerializerCompiler<unknown> = () => (data: unknown) => JSON.stringify(data);

/** Today's content type of JSON answers (Fastify's default for a serialized object). */
const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/**
 * Sends `json`, JSON text in the shape of the route's 200 schema, as the body. The reply's type is
 * loosened on purpose: the type provider types send() with the schema's value, not its text.
 */
export function sendJsonText(reply: FastifyReply, json: string): FastifyReply {
  return reply.type(JSON_CONTENT_TYPE).send(json.length > ENCODED_FIRST_CHARS ? Buffer.from(json) : json);
}

/**
 * Above this many characters an answer is encoded to bytes before it is sent. Given a string, Node
 * joins it to the headers and flattens the join, a copy of the whole answer before encoding it:
 * 1.9 ms of the event loop for a megabyte, where encoding it first and sending the bytes costs 0.8.
 * Below it the string is cheaper (one write, no buffer).
 */
const ENCODED_FIRST_CHARS = 64 * 1024;

/**
 * Above this many characters an answer of pieces is written piece by piece rather than joined: a
 * page of large states is megabytes, and joining it, then encoding the whole of it to the socket,
 * are each one piece of work of the event loop that every other request of every tenant waits
 * behind (tens of milliseconds at 4 MB here). Below it one string with a Content-Length costs less.
 */
export const PIECEWISE_ANSWER_CHARS = 256 * 1024;

/**
 * Sends the JSON text `pieces` make together, as sendJsonText does; a large one as a stream of its
 * pieces (chunked transfer coding), each written when the socket has taken the ones before.
 */
export function sendJsonPieces(reply: FastifyReply, pieces: string[]): FastifyReply {
  let chars = 0;
  for (const piece of pieces) chars += piece.length;
  if (chars <= PIECEWISE_ANSWER_CHARS) return sendJsonText(reply, pieces.join(''));
  return reply.type(JSON_CONTENT_TYPE).send(Readable.from(pieces, { objectMode: false, highWaterMark: PIECEWISE_ANSWER_CHARS }));
}

/**
 * Where `jsonWithRawValue` puts JSON text: a string no request can hold (a NUL character, which
 * the service refuses in any text it stores, and a random part of this process's).
 */
export const RAW_JSON_SLOT = `\u0000raw-json-${randomBytes(9).toString('base64url')}`;
const QUOTED_RAW_JSON_SLOT = JSON.stringify(RAW_JSON_SLOT);

/**
 * JSON.stringify of `value`, where RAW_JSON_SLOT as a string value is replaced by `json` (text
 * PostgreSQL wrote, passed on unparsed). A value without the slot (a field left out of the answer)
 * is written as it is.
 */
export function jsonWithRawValue(value: unknown, json: string): string {
  const text = JSON.stringify(value);
  const at = text.indexOf(QUOTED_RAW_JSON_SLOT);
  return at < 0 ? text : text.slice(0, at) + json + text.slice(at + QUOTED_RAW_JSON_SLOT.length);
}
