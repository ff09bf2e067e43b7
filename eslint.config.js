import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import boundaries from './eslint-rules/module-boundaries.js';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'data/', 'coverage/', 'openapi/', 'clients/typescript/dist/', 'clients/typescript/src/generated/', 'console/dist/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-syntax': ['error', { selector: 'TSEnumDeclaration', message: 'Use `as const` objects, not enums.' }],
    },
  },
  // Layering (docs/design.md §9; the style guide is ../shared/STYLE.md, outside this repository):
  // imports run one way, routes → service → repository → database, with src/http, src/lib and src/db
  // below the modules. Each `layer` block covers one folder or role, and no file is in two of them (a
  // later block's `no-restricted-imports` would replace an earlier one's).
  layer(['src/http/**/*.ts'], [
    { group: ['**/modules/**'], message: 'src/http is below the modules: have buildApp inject what it needs.' },
  ]),
  layer(['src/lib/**/*.ts'], [
    { group: ['**/http/**', '**/modules/**', '**/db/**'], message: 'src/lib holds pure helpers: no HTTP, no modules, no database.' },
    { group: ['fastify', 'kysely', 'pg'], message: 'src/lib holds pure helpers: no HTTP, no database.' },
  ]),
  layer(['src/db/**/*.ts'], [
    { group: ['**/http/**', '**/modules/**'], message: 'src/db is the bottom layer: it imports no module and no HTTP code.' },
  ]),
  // The client is its own package, published without the server: it imports none of the server's
  // code and nothing of Node's, only the global fetch and crypto.
  layer(['clients/typescript/src/**/*.ts'], [
    { group: ['**/src/**', '**/test/**', 'fastify', 'kysely', 'pg', 'zod', 'node:*'], message: 'The client package stands alone: no server code, no Node built-ins.' },
  ]),
  // The API 3.0 face maps SDK models onto the services; like routes, it never reaches below them.
  layer(['src/modules/tencent/*-actions.ts', 'src/modules/tencent/tc3-*.ts'], [
    { group: ['kysely', 'fastify', '**/*.repository.js'], message: 'The API 3.0 actions call services; queries live in repositories, HTTP in tc3.routes.ts.' },
  ]),
  // Module boundaries (eslint-rules/module-boundaries.js), by folder: every file under src/modules
  // is covered, whatever its name. Other modules are reached only through their index.ts; an
  // index.ts exports no repository; modules import each other without cycles; only *.repository.ts
  // files query and only *.routes.ts files speak HTTP. The wiring outside the modules (src/app.ts,
  // src/routes.ts, src/server.ts, src/cli) also reaches the modules through their index.ts.
  {
    files: ['src/**/*.ts'],
    plugins: { boundaries },
    rules: {
      'boundaries/no-deep-import': 'error',
      'boundaries/no-repository-in-entry': 'error',
      'boundaries/no-module-cycle': 'error',
      'boundaries/file-roles': 'error',
    },
  },
);

/** An ESLint block forbidding, in `files`, imports matching `patterns`. */
function layer(files, patterns) {
  return { files, rules: { 'no-restricted-imports': ['error', { patterns }] } };
}
