// scripts/check-frozen-migrations.sh, which CI runs: in a scratch git repository, an edit of a
// migration that main already had fails the check; a new migration, or a branch reshaping its own
// new migration before the merge, does not.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const SCRIPT = fileURLToPath(new URL('../../scripts/check-frozen-migrations.sh', import.meta.url));
let repo: string;

const git = (...args: string[]) => execFileSync('git', args, { cwd: repo, encoding: 'utf8' });
function commit(message: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) writeFileSync(join(repo, path), text);
  git('add', '-A');
  git('commit', '-q', '-m', message);
}
const check = () => spawnSync('bash', [SCRIPT], { cwd: repo, encoding: 'utf8' });

beforeEach(() => {
  repo = mkdtempSync(join(tmpdir(), 'ass-frozen-'));
  mkdirSync(join(repo, 'migrations'));
  git('init', '-q', '-b', 'main');
  git('config', 'user.email', 'test@example.com');
  git('config', 'user.name', 'test');
  commit('first migration', { 'migrations/0001_core.sql': 'CREATE TABLE a (x int);\n' });
});
afterEach(() => rmSync(repo, { recursive: true, force: true }));

describe('check-frozen-migrations', () => {
  it('passes a history that only adds migrations', () => {
    commit('second migration', { 'migrations/0002_more.sql': 'CREATE TABLE b (x int);\n' });
    const result = check();
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('no committed migration changed');
  });

  it('fails on main when a committed migration is edited, naming the commit and the file', () => {
    commit('edit the first migration', { 'migrations/0001_core.sql': 'CREATE TABLE a (x bigint);\n' });
    const result = check();
    expect(result.status).toBe(1);
    expect(result.stdout).toContain('edit the first migration');
    expect(result.stdout).toContain('M\tmigrations/0001_core.sql');
  });

  it('fails when a committed migration is renamed (a delete on main)', () => {
    git('mv', 'migrations/0001_core.sql', 'migrations/0009_core.sql');
    git('commit', '-q', '-m', 'renumber');
    const result = check();
    expect(result.status).toBe(1);
    expect(result.stdout).toContain('D\tmigrations/0001_core.sql');
  });

  it('fails when a branch edits a migration main already had, once it is merged', () => {
    git('checkout', '-q', '-b', 'feature');
    commit('edit on a branch', { 'migrations/0001_core.sql': 'CREATE TABLE a (y int);\n' });
    git('checkout', '-q', 'main');
    git('merge', '-q', '--no-ff', '-m', 'merge feature', 'feature');
    const result = check();
    expect(result.status).toBe(1);
    expect(result.stdout).toContain('merge feature');
  });

  it('passes a branch that reshapes its own new migration before the merge', () => {
    git('checkout', '-q', '-b', 'feature');
    commit('new migration', { 'migrations/0002_new.sql': 'CREATE TABLE b (x int);\n' });
    commit('reshape it', { 'migrations/0002_new.sql': 'CREATE TABLE b (x bigint);\n' });
    git('checkout', '-q', 'main');
    git('merge', '-q', '--no-ff', '-m', 'merge feature', 'feature');
    expect(check().status).toBe(0);
  });
});
