// The shapes of each operation's call, derived from the generated `operations` type: path and query
// parameters, the JSON body, the success result and the preconditions it accepts. Nothing here is
// written by hand but the derivation.
import type { operations } from './generated/openapi.js';
import type { OperationId } from './operations.js';

type Nothing = Record<never, never>;
/** T without undefined, or an empty object when nothing is left (openapi-typescript writes `path?: never`). */
type Part<T> = [Exclude<T, undefined>] extends [never] ? Nothing : Exclude<T, undefined>;
type ParametersOf<K extends OperationId> = operations[K]['parameters'];

/** Path and query parameters of operation K, in one object. */
export type Params<K extends OperationId> = Part<ParametersOf<K>['path']> & Part<ParametersOf<K>['query']>;

/** The JSON request body of operation K (never when it takes none). */
export type Body<K extends OperationId> =
  Exclude<operations[K]['requestBody'], undefined> extends { content: { 'application/json': infer B } } ? B : never;

type Responses<K extends OperationId> = operations[K]['responses'];
type SuccessStatus<K extends OperationId> = Extract<keyof Responses<K>, 200 | 201 | 204>;
type ContentOf<R> = R extends { content: { 'application/json': infer B } } ? B : R extends { content: Record<string, infer T> } ? T : void;
type DeclaresEtag<R> = R extends { headers: { ETag: string } } ? true : false;

/** What operation K answers on success: the JSON body, plus `etag` where the answer carries one. */
export type Result<K extends OperationId> = {
  [S in SuccessStatus<K>]: true extends DeclaresEtag<Responses<K>[S]> ? ContentOf<Responses<K>[S]> & { etag: string } : ContentOf<Responses<K>[S]>;
}[SuccessStatus<K>];

/** An item of the list in field F of operation K's page (e.g. a Session of listSessions' `sessions`). */
export type PageItem<K extends OperationId, F extends keyof Result<K>> = Result<K>[F] extends readonly (infer Item)[] ? Item : never;

type Headers<K extends OperationId> = Part<ParametersOf<K>['header']>;

/** Options every call takes. */
export interface RequestOptions {
  signal?: AbortSignal;
  /** Sent as X-Request-Id (the server keeps a well-formed one, so logs line up); generated otherwise. */
  requestId?: string;
}

/** RequestOptions, plus `ifMatch` / `ifNoneMatch` where operation K accepts them. */
export type CallOptions<K extends OperationId> = RequestOptions &
  ('if-match' extends keyof Headers<K> ? { /** An ETag (e.g. `session.etag`); a changed resource answers 412. */ ifMatch?: string } : Nothing) &
  ('if-none-match' extends keyof Headers<K> ? { /** `*`: create only, 412 when it exists. */ ifNoneMatch?: string } : Nothing);
