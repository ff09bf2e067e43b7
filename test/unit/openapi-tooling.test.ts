// The committed OpenAPI document is a product for other tools: Redocly's recommended rules accept it,
// and openapi-typescript turns it into types a strict TypeScript program can use. Both run from
// node_modules, without the network.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const DOCUMENT = join(ROOT, 'openapi/openapi.json');

// Uses a few operations the way a client would; each @ts-expect-error line must stay an error, so
// a document that loosened a type to `unknown` fails here as surely as one that broke it.
const PROGRAM = `
import type { components, operations, paths } from './api.js';

type JsonValue = components['schemas']['JsonValue'];
type JsonObject = components['schemas']['JsonObject'];
type Session = components['schemas']['Session'];
type ErrorBody = components['schemas']['Error'];
type AppendBody = operations['appendEvents']['requestBody']['content']['application/json'];
type Appended = operations['appendEvents']['responses'][201]['content']['application/json'];
type Context = operations['getContext']['responses'][200]['content']['application/json'];
type Conflict = paths['/v1/spaces/{spaceId}/users/{userId}/sessions/{sessionId}/events']['post']['responses'][409]['content']['application/json'];

const delta: JsonObject = { 'user:plan': 'pro', turns: 3, nested: { list: [1, 'two', null, { deep: true }] } };
const single: AppendBody = { author: 'user', content: { role: 'user', parts: [{ text: 'hi' }] }, actions: { stateDelta: delta } };
const batch: AppendBody = { events: [{ author: 'model', actions: { stateDelta: { 'temp:x': null }, stateDeltaMode: 'merge-patch' } }] };

function planOf(session: Session): string | undefined {
  const state: JsonObject = session.state;
  const plan: JsonValue | undefined = state['user:plan'];
  return typeof plan === 'string' ? plan : undefined;
}
function revisions(answer: Appended, context: Context): number[] {
  return [answer.session.revision, context.session.revision, ...answer.events.map((event) => event.seq)];
}
function codeOf(body: ErrorBody | Conflict): string {
  return body.error.code + ' ' + body.error.requestId;
}
const etag: operations['describeSession']['responses'][200]['headers']['ETag'] = '"3"';

// @ts-expect-error an event needs an author
const authorless: AppendBody = { actions: { stateDelta: {} } };
// @ts-expect-error a state delta is a JSON object, not an array
const arrayDelta: AppendBody = { author: 'user', actions: { stateDelta: [1] } };
// @ts-expect-error a JSON value holds no functions
const notJson: JsonValue = () => 1;
// @ts-expect-error the error envelope's code is a string
const numericCode: ErrorBody = { error: { code: 1, message: 'm', requestId: 'r' } };

export { single, batch, planOf, revisions, codeOf, etag, authorless, arrayDelta, notJson, numericCode };
`;

const scratch = mkdtempSync(join(tmpdir(), 'openapi-typescript-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the committed OpenAPI document, read by other tools', () => {
  it('passes redocly lint (recommended rules, as redocly.yaml configures them) with no error or warning', () => {
    const output = execFileSync(process.execPath, [join(ROOT, 'node_modules/@redocly/cli/bin/cli.js'), 'lint', DOCUMENT, '--format=json'], {
      cwd: ROOT,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'], // its progress lines and Node version notice go to stderr
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', NO_COLOR: '1' },
    });
    const report = JSON.parse(output.slice(output.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: { ruleId: string; message: string }[] };
    expect(report.problems.map((problem) => `${problem.ruleId}: ${problem.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  }, 120_000);

  it('generates TypeScript types with openapi-typescript that a strict program compiles against', async () => {
    const types = astToString(await openapiTS(readFileSync(DOCUMENT, 'utf8')));
    expect(types).toContain('JsonValue:');
    writeFileSync(join(scratch, 'api.ts'), types);
    writeFileSync(join(scratch, 'program.ts'), PROGRAM);

    const program = ts.createProgram([join(scratch, 'program.ts')], {
      strict: true,
      noEmit: true,
      noUncheckedIndexedAccess: true,
      exactOptionalPropertyTypes: true,
      target: ts.ScriptTarget.ES2023,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      types: [],
      skipLibCheck: false,
    });
    const messages = ts.getPreEmitDiagnostics(program).map((diagnostic) => {
      const where = diagnostic.file && diagnostic.start !== undefined ? diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start) : undefined;
      const file = diagnostic.file ? diagnostic.file.fileName.slice(scratch.length + 1) : '';
      return `${file}:${where ? where.line + 1 : '?'} TS${diagnostic.code} ${ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ')}`;
    });
    expect(messages).toEqual([]);
  }, 120_000);
});
