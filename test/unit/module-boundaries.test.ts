// The module-boundary lint rules (eslint-rules/module-boundaries.js) through ESLint's own API and
// the repository's eslint.config.js: each rule fires on a snippet that breaks it and stays quiet on
// one that keeps it. Snippets are linted as if they were files at the given paths; the cycle rule
// reads the module graph of the real src/modules.
import path from 'node:path';
import { ESLint } from 'eslint';
import { beforeAll, describe, expect, it } from 'vitest';

const root = path.resolve(import.meta.dirname, '../..');
const eslint = new ESLint({ cwd: root, overrideConfigFile: path.join(root, 'eslint.config.js') });

async function boundaryProblems(file: string, code: string): Promise<{ rule: string; message: string }[]> {
  const [result] = await eslint.lintText(code, { filePath: path.join(root, file) });
  return (result?.messages ?? [])
    .filter((m) => m.ruleId?.startsWith('boundaries/') ?? false)
    .map((m) => ({ rule: m.ruleId ?? '', message: m.message }));
}

// The first lint loads the configuration and typescript-eslint: seconds on a busy machine.
beforeAll(async () => {
  await eslint.lintText('export {};\n', { filePath: path.join(root, 'src/modules/context/warm-up.ts') });
}, 60_000);

describe('boundaries/no-deep-import', () => {
  it('forbids importing a file inside another module', async () => {
    const problems = await boundaryProblems(
      'src/modules/context/snippet.ts',
      "import { sessionNotFound } from '../sessions/session-not-found.js';\nexport const f = sessionNotFound;\n",
    );
    expect(problems.map((p) => p.rule)).toContain('boundaries/no-deep-import');
  });

  it("forbids another module's repository, even a type", async () => {
    const problems = await boundaryProblems(
      'src/modules/context/snippet.ts',
      "import type { LockedSession } from '../sessions/sessions.repository.js';\nexport type T = LockedSession;\n",
    );
    expect(problems.map((p) => p.rule)).toContain('boundaries/no-deep-import');
  });

  it("allows the other module's index.js and the module's own files", async () => {
    const problems = await boundaryProblems(
      'src/modules/context/snippet.ts',
      "import { sessionNotFound } from '../sessions/index.js';\nimport { selectContextWindow } from './context-window.js';\nexport const f = [sessionNotFound, selectContextWindow];\n",
    );
    expect(problems).toEqual([]);
  });

  it("forbids the wiring outside the modules (src/app.ts …) a module's inner file", async () => {
    const problems = await boundaryProblems('src/snippet.ts', "import { createAppendPath } from './modules/events/append.service.js';\nexport const f = createAppendPath;\n");
    expect(problems.map((p) => p.rule)).toEqual(['boundaries/no-deep-import']);
    expect(await boundaryProblems('src/snippet.ts', "import { createAppendPath } from './modules/events/index.js';\nexport const f = createAppendPath;\n")).toEqual([]);
  });
});

describe('boundaries/no-repository-in-entry', () => {
  it('forbids an index.ts re-exporting a repository', async () => {
    const problems = await boundaryProblems('src/modules/sessions/index.ts', "export { lockSession } from './sessions.repository.js';\n");
    expect(problems.map((p) => p.rule)).toEqual(['boundaries/no-repository-in-entry']);
  });

  it('allows an index.ts re-exporting a service', async () => {
    const problems = await boundaryProblems('src/modules/sessions/index.ts', "export { lockSession } from './session-rows.service.js';\n");
    expect(problems).toEqual([]);
  });
});

describe('boundaries/no-module-cycle', () => {
  it('reports an import that closes a cycle, naming it', async () => {
    // sessions imports state: state importing sessions would close sessions → state → sessions.
    const problems = await boundaryProblems('src/modules/state/snippet.ts', "import { sessionNotFound } from '../sessions/index.js';\nexport const f = sessionNotFound;\n");
    expect(problems).toEqual([{ rule: 'boundaries/no-module-cycle', message: 'Module cycle: state → sessions → state.' }]);
  });

  it('allows an import along the graph', async () => {
    const problems = await boundaryProblems('src/modules/events/snippet.ts', "import { splitByScope } from '../state/index.js';\nexport const f = splitByScope;\n");
    expect(problems).toEqual([]);
  });
});

describe('boundaries/file-roles', () => {
  it('forbids kysely, src/db and query builders outside repositories, whatever the file is called', async () => {
    const problems = await boundaryProblems(
      'src/modules/sessions/sweeper.ts',
      "import { sql } from 'kysely';\nimport type { Database } from '../../db/connect.js';\nexport const f = (db: Database) => db.selectFrom('sessions').select(sql`1`.as('one'));\n",
    );
    expect(problems.map((p) => p.rule)).toEqual(['boundaries/file-roles', 'boundaries/file-roles']);
    expect(problems.map((p) => p.message).join('\n')).toMatch(/'kysely' is query code[\s\S]*'selectFrom' builds a query/);
  });

  it('allows queries in a repository and type imports anywhere', async () => {
    const code = "import { sql } from 'kysely';\nimport type { Database } from '../../db/connect.js';\nexport const f = (db: Database) => db.selectFrom('sessions').select(sql`1`.as('one'));\n";
    expect(await boundaryProblems('src/modules/sessions/sweeper.repository.ts', code)).toEqual([]);
    expect(await boundaryProblems('src/modules/sessions/sweeper.ts', "import type { Database } from '../../db/connect.js';\nexport type D = Database;\n")).toEqual([]);
  });

  it('forbids fastify and src/http outside routes, but not the shared zod schemas', async () => {
    const problems = await boundaryProblems(
      'src/modules/sessions/helper.ts',
      "import fastify from 'fastify';\nimport { authorize } from '../../http/authorization.js';\nimport { Identifier } from '../../http/schemas.js';\nexport const f = [fastify, authorize, Identifier];\n",
    );
    expect(problems.map((p) => p.message)).toEqual([
      expect.stringMatching(/^'fastify' is HTTP code/),
      expect.stringMatching(/^'\.\.\/\.\.\/http\/authorization\.js' is HTTP code/),
    ]);
    const inRoutes = await boundaryProblems(
      'src/modules/sessions/helper.routes.ts',
      "import fastify from 'fastify';\nimport { authorize } from '../../http/authorization.js';\nexport const f = [fastify, authorize];\n",
    );
    expect(inRoutes).toEqual([]);
  });

  it('forbids a route importing a repository', async () => {
    const problems = await boundaryProblems(
      'src/modules/sessions/helper.routes.ts',
      "import { lockSession } from './sessions.repository.js';\nexport const f = lockSession;\n",
    );
    expect(problems.map((p) => p.message)).toEqual(['Routes call services; queries live in repositories.']);
  });
});
