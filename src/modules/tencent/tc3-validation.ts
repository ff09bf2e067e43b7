// Request validation on the API 3.0 face. Two stages, both zod, compiled (lib/compiled-schema.ts):
//  1. the action's own request model (PascalCase fields, the SDK models' types and limits, JSON
//     strings parsed), whose issues name the field as the SDK does: `Event.Content.Parts[0].Text`;
//  2. the REST schema of the same operation, so that both faces share one set of rules; its
//     issues are renamed to this face's fields by `restField`.
import type { z } from 'zod';
import { compiledSchema } from '../../lib/compiled-schema.js';
import { Tc3Error, type Tc3ErrorCode } from './tc3-errors.js';

type Issue = z.core.$ZodIssue;

/** `["Event", "Content", "Parts", 0, "Text"]` → `Event.Content.Parts[0].Text`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  let name = '';
  for (const key of path) name += typeof key === 'number' ? `[${key}]` : name ? `.${String(key)}` : String(key);
  return name;
}

function codeOf(issue: Issue): Tc3ErrorCode {
  if (issue.code === 'unrecognized_keys') return 'UnknownParameter';
  if (issue.code === 'invalid_type') return /received undefined/.test(issue.message) ? 'MissingParameter' : 'InvalidParameter';
  return 'InvalidParameterValue';
}

function messageOf(issue: Issue, field: string): string {
  if (issue.code === 'unrecognized_keys') {
    const names = issue.keys.map((key) => (field ? `${field}.${key}` : key));
    return `${names.join(', ')}: not a parameter of this action`;
  }
  return `${field || 'request'}: ${issue.message}`;
}

/** The first issue decides the code; every issue is listed in the message. */
function errorOf(issues: readonly Issue[], rename: (path: readonly PropertyKey[]) => string): Tc3Error {
  const first = issues[0]!;
  return new Tc3Error(codeOf(first), issues.map((issue) => messageOf(issue, rename(issue.path))).join('; '));
}

/** Stage 1: the value of `schema` (the action's model), or a Tc3Error naming the field. */
export function parseModel<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const result = compiledSchema(schema).safeParse(value);
  if (!result.success) throw errorOf(result.error.issues, fieldPath);
  return result.data;
}

/**
 * Stage 2: the REST input of the operation. `restField` turns a REST path (`["metadata", "k"]`)
 * into this face's field name (`Metadata`); by default each name is capitalized under `prefix`.
 */
export function parseServiceInput<T extends z.ZodType>(schema: T, value: unknown, restField: (path: readonly PropertyKey[]) => string = pascalPath()): z.output<T> {
  const result = compiledSchema(schema).safeParse(value);
  if (!result.success) throw errorOf(result.error.issues, restField);
  return result.data;
}

/**
 * REST path → this face's name: each key capitalized (`content.parts[0].text` →
 * `Content.Parts[0].Text`), under `prefix`. `jsonStrings` are the REST keys whose values came as
 * JSON strings on this face (`Actions.StateDelta`): past one, the path is inside the client's own
 * JSON text and is named as written, as stage 1 names it (`Event.Actions.StateDelta: at myKey`).
 */
export function pascalPath(prefix: readonly PropertyKey[] = [], renames: Record<string, string> = {}, jsonStrings: readonly string[] = []): (path: readonly PropertyKey[]) => string {
  return (path) => {
    const named: PropertyKey[] = [...prefix];
    for (const [index, key] of path.entries()) {
      if (typeof key !== 'string') {
        named.push(key);
        continue;
      }
      named.push(renames[key] ?? key.charAt(0).toUpperCase() + key.slice(1));
      if (jsonStrings.includes(key) && index + 1 < path.length) return `${fieldPath(named)}: at ${fieldPath(path.slice(index + 1))}`;
    }
    return fieldPath(named);
  };
}

/**
 * Drops `null` members, deep (the Node SDK does so before sending; other clients may send them
 * for absent optional fields). Strings are left alone: a JSON string's own nulls stay in it.
 */
export function withoutNulls(value: unknown): unknown {
  if (Array.isArray(value)) return value.filter((item) => item !== null).map(withoutNulls);
  if (value === null || typeof value !== 'object') return value;
  const result: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) if (item !== null) result[key] = withoutNulls(item);
  return result;
}
