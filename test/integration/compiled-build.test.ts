// The service as the Docker image runs it: the TypeScript compiled by tsconfig.build.json (not
// through tsx), started by the Dockerfile's own CMD (migrations, then `exec` the server) on the
// Node.js line of its FROM image, on a fresh data folder like a new container's, and probed by its
// HEALTHCHECK command. Every other test runs src/ through tsx, so a file the compiled layout lacks
// (dist/db/migrate.js reads ../../migrations, dist/http/console.js serves ../../console/dist) or an
// import only tsx resolves would pass them all and break the image. No Docker engine is needed.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, killServiceProcess, nodeOfMajor, type ServiceProcess, sleep, startServiceProcess, waitUntilReady } from '../support/service-process.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TIMEOUT_MS = 180_000;

/** What the tests take from the Dockerfile: the runtime image's Node.js major, its CMD and HEALTHCHECK commands. */
interface DockerfileFacts {
  nodeMajor: string;
  command: string[];
  healthcheck: string[];
}

function readDockerfile(text: string): DockerfileFacts {
  const stages = [...text.matchAll(/^FROM node:(\d+)-\S+ AS (\w+)$/gm)];
  const runtime = stages.find((stage) => stage[2] === 'runtime');
  const command = /^CMD (\[.*\])$/m.exec(text);
  const healthcheck = /^HEALTHCHECK [^\n]*\\\n\s*CMD (\[.*\])$/m.exec(text);
  if (!runtime || !command || !healthcheck) throw new Error('the Dockerfile no longer has a runtime stage FROM node:<major>, a CMD and a HEALTHCHECK in the forms this test reads');
  return { nodeMajor: runtime[1]!, command: JSON.parse(command[1]!) as string[], healthcheck: JSON.parse(healthcheck[1]!) as string[] };
}

const run = (command: string, args: string[], env: Record<string, string> = {}) =>
  new Promise<{ code: number | null; output: string }>((resolve) =>
    execFile(command, args, { cwd: ROOT, env: { PATH: process.env.PATH ?? '', ...env }, timeout: TIMEOUT_MS }, (error, stdout, stderr) =>
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : null) : 0, output: stdout + stderr }),
    ),
  );

let docker: DockerfileFacts;
let node: string;
/** The compiled service: a folder beside migrations/ and console/, as dist/ is in the image. */
let buildDir: string;
let dataDir: string;
let server: ServiceProcess | undefined;

beforeAll(async () => {
  docker = readDockerfile(await readFile(join(ROOT, 'Dockerfile'), 'utf8'));
  node = nodeOfMajor((major) => String(major) === docker.nodeMajor, docker.nodeMajor, TIMEOUT_MS);
  buildDir = await mkdtemp(join(ROOT, '.compiled-build-'));
  dataDir = await mkdtemp(join(tmpdir(), 'ass-compiled-'));
  const compiled = await run(process.execPath, [join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', buildDir]);
  if (compiled.code !== 0) throw new Error(`tsc -p tsconfig.build.json failed:\n${compiled.output}`);
}, TIMEOUT_MS);

afterAll(async () => {
  killServiceProcess(server);
  // A server the shell left behind (a CMD without `exec`) runs from this build's folder, named for this run only.
  if (buildDir) await run('pkill', ['-KILL', '-f', basename(buildDir)]);
  await server?.exited;
  await Promise.all([buildDir, dataDir].filter(Boolean).map((folder) => rm(folder, { recursive: true, force: true })));
});

describe('the compiled build, as the Docker image runs it', () => {
  it('migrates and serves on a fresh data folder through the CMD, answers the API, the document, the console and the HEALTHCHECK, and stops on SIGTERM', { timeout: TIMEOUT_MS }, async () => {
    expect(await run(node, ['--version'])).toEqual({ code: 0, output: expect.stringMatching(new RegExp(`^v${docker.nodeMajor}\\.`)) });
    // The CMD as written, with the image's dist/ as this build's folder and `node` as that Node.js.
    const [shell, flag, script] = docker.command;
    expect([shell, flag]).toEqual(['sh', '-c']);
    expect(script).toMatch(/^node dist\/cli\/migrate\.js && exec node dist\/server\.js$/);
    const ours = script!.replaceAll('dist/', `${basename(buildDir)}/`).replaceAll(/(^|&& exec )node /g, `$1${node} `);
    const port = String(await freePort());
    server = startServiceProcess({ NODE_ENV: 'production', PORT: port, DATA_DIR: dataDir, LOG_LEVEL: 'info' }, [shell!, flag!, ours]);
    await waitUntilReady(server, 120_000);
    expect(server.output()).toMatch(/^applied: 0001_core, /m);

    const token = /export TOKEN=(\S+)/.exec(server.output())?.[1];
    const spaceId = /^Default space: (\S+)$/m.exec(server.output())?.[1];
    expect(token && spaceId).toBeTruthy();
    const call = async (method: string, path: string, body?: unknown) => {
      const res = await fetch(`${server!.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    const session = `/v1/spaces/${spaceId}/users/u1/sessions/s1`;
    expect((await call('POST', `/v1/spaces/${spaceId}/users/u1/sessions`, { sessionId: 's1' })).status).toBe(201);
    const appended = await call('POST', `${session}/events`, { author: 'user', content: { role: 'user', parts: [{ text: 'hi' }] }, actions: { stateDelta: { step: 1 } } });
    expect(appended.status).toBe(201);
    const context = await call('GET', `${session}/context`);
    expect(context).toMatchObject({ status: 200, body: { session: { state: { step: 1 }, eventCount: 1 }, events: [{ seq: 1, author: 'user' }] } });

    // The built server describes the committed document, and serves the built console.
    const committed = JSON.parse(await readFile(join(ROOT, 'openapi/openapi.json'), 'utf8')) as unknown;
    expect(await (await fetch(`${server.baseUrl}/openapi.json`)).json()).toEqual(committed);
    const consolePage = await fetch(`${server.baseUrl}/console/`);
    expect([consolePage.status, consolePage.headers.get('content-type')]).toEqual([200, expect.stringMatching(/^text\/html/)]);

    const [checker, ...checkArgs] = docker.healthcheck;
    expect(checker).toBe('node');
    expect(await run(node, checkArgs, { PORT: port })).toEqual({ code: 0, output: '' });

    // `exec` made the server the shell's process: SIGTERM reaches it and it shuts down cleanly.
    // Without it the shell would die and leave the server running, holding the output pipes open.
    server.child.kill('SIGTERM');
    const stopped = await Promise.race([server.exited, sleep(30_000).then(() => 'still running 30 s after SIGTERM')]);
    expect(stopped).toEqual({ code: 0, signal: null });
    expect(server.logLines().map((line) => line.msg)).toContain('shutting down');
    expect((await run(node, checkArgs, { PORT: port })).code).toBe(1);
  });
});
