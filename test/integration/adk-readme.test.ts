// The README's three lines that give an ADK agent this service, run as written: the package is
// built (`agent-session-client/adk` resolves to its dist/adk.js through the package's exports),
// the lines are put in a module after a scripted agent is defined, and a turn runs in a process of
// its own against the server.
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestApp, type TestApp } from '../support/test-app.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));

let t: TestApp;
let baseUrl: string;
let scratch: string;
beforeAll(async () => {
  t = await createTestApp();
  baseUrl = await t.app.listen({ port: 0, host: '127.0.0.1' });
  // The package as npm would install it, in a directory of this test's own under node_modules (so
  // that @google/adk resolves as in an application, and the two CI runs side by side never write
  // one dist/ at once): its package.json and its build, by its own tsconfig.
  scratch = await mkdtemp(join(ROOT, 'node_modules', '.adk-readme-'));
  const installed = join(scratch, 'node_modules', 'agent-session-client');
  await mkdir(installed, { recursive: true });
  await copyFile(join(ROOT, 'clients/typescript/package.json'), join(installed, 'package.json'));
  await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', join(ROOT, 'clients/typescript/tsconfig.json'), '--outDir', join(installed, 'dist')], { cwd: ROOT });
});
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
  await t?.close();
});

async function readmeLines(): Promise<string[]> {
  const readme = await readFile(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('## ADK session service'));
  const block = /```js\n([\s\S]*?)```/.exec(section)?.[1];
  return (block ?? '').trimEnd().split('\n');
}

describe('README: ADK session service', () => {
  it('its three lines, as written, give an ADK Runner this service', async () => {
    const lines = await readmeLines();
    expect(lines).toHaveLength(3);
    const agentModule = pathToFileURL(join(ROOT, 'test/support/adk-agent.ts')).href;
    const program = [
      "import { Runner } from '@google/adk';",
      `import { ScriptedLlm, collect, scriptedAgent, userMessage } from '${agentModule}';`,
      'const agent = scriptedAgent(new ScriptedLlm());',
      ...lines,
      "const session = await sessionService.createSession({ appName: 'my-agent', userId: 'alice' });",
      "const events = await collect(runner.runAsync({ userId: 'alice', sessionId: session.id, newMessage: userMessage('remember the README works') }));",
      'console.log(JSON.stringify({ sessionId: session.id, answer: events.at(-1).content.parts[0].text }));',
    ].join('\n');
    const file = join(scratch, 'readme-adk.mts');
    await writeFile(file, program);
    const { stdout } = await run(process.execPath, ['--import', 'tsx', file], {
      cwd: ROOT,
      env: { ...process.env, SESSION_SERVICE_URL: baseUrl, TOKEN: t.account.rootCredential.token },
    });
    const { sessionId, answer } = JSON.parse(stdout.trim().split('\n').at(-1)!) as { sessionId: string; answer: string };
    expect(answer).toBe('Noted: the README works (1 facts)');
    const [space] = await t.db.selectFrom('session_spaces').select('space_id').where('account_id', '=', t.account.accountId).where('name', '=', 'my-agent').execute();
    const rows = await t.db.selectFrom('events').select(['seq', 'author']).where('space_id', '=', space!.space_id).where('session_id', '=', sessionId).orderBy('seq').execute();
    expect(rows.map((row) => row.author)).toEqual(['user', 'assistant', 'assistant', 'assistant']);
  });
});
