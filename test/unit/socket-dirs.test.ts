// The embedded database's socket directories: a start removes those of processes that are gone
// (a killed server could not remove its own) and nothing else.
import { spawnSync } from 'node:child_process';
import { createServer } from 'node:net';
import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, expect, it } from 'vitest';
import { makeSocketDir } from '../../src/db/socket-dirs.js';

let parent: string;
beforeEach(async () => {
  parent = await mkdtemp(join(tmpdir(), 'socket-dirs-test-'));
});
afterEach(async () => rm(parent, { recursive: true, force: true }));

async function socketDir(name: string, owner: number | undefined): Promise<void> {
  await mkdir(join(parent, name));
  await writeFile(join(parent, name, '.s.PGSQL.5432'), '');
  if (owner !== undefined) await writeFile(join(parent, name, 'owner.pid'), String(owner));
}

it('removes the directories of processes that are gone, and keeps those of running processes, those whose socket answers, those without an owner and other names', async () => {
  // A process that ran and exited: its pid names no process now.
  const gone = spawnSync(process.execPath, ['-e', '']).pid!;
  await socketDir('ass-pglite-gone', gone);
  await socketDir('ass-pglite-running', process.pid);
  await socketDir('ass-pglite-unowned', undefined);
  await socketDir('ass-pgcluster-other', gone);
  // Its owner's pid names no process here, but its socket answers: a server in another PID
  // namespace (a container sharing the folder) is still using it.
  await mkdir(join(parent, 'ass-pglite-listening'));
  await writeFile(join(parent, 'ass-pglite-listening', 'owner.pid'), String(gone));
  const listening = createServer();
  await new Promise<void>((resolve) => listening.listen(join(parent, 'ass-pglite-listening', '.s.PGSQL.5432'), resolve));

  const made = await makeSocketDir(parent);
  await new Promise((resolve) => listening.close(resolve));

  expect((await readdir(parent)).sort()).toEqual(['ass-pgcluster-other', 'ass-pglite-listening', 'ass-pglite-running', 'ass-pglite-unowned', made.slice(parent.length + 1)].sort());
  expect(await readFile(join(made, 'owner.pid'), 'utf8')).toBe(String(process.pid));
  // Private: no other local user can reach the socket inside it.
  expect((await stat(made)).mode & 0o777).toBe(0o700);
});

it('makes a directory when the folder holds none', async () => {
  const made = await makeSocketDir(parent);
  expect(await readdir(parent)).toEqual([made.slice(parent.length + 1)]);
});
