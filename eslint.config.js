import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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
  // Layering (STYLE.md, docs/design.md §9): imports run one way, routes → service → repository →
  // database, with src/http and src/lib below the modules. Each block covers files of one role, and
  // no file is in two blocks (a later block's `no-restricted-imports` would replace an earlier one's).
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
  layer(['src/modules/**/*.routes.ts'], [
    { group: ['kysely', '**/*.repository.js'], message: 'Routes call services; queries live in repositories.' },
  ]),
  layer(['src/modules/**/*.service.ts'], [
    { group: ['**/http/**', 'fastify'], message: 'Services know nothing of HTTP: pure helpers they need live in src/lib.' },
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
  layer(['src/modules/**/*.repository.ts'], [
    { group: ['**/http/**', 'fastify'], message: 'Repositories know nothing of HTTP.' },
  ]),
);

/** An ESLint block forbidding, in `files`, imports matching `patterns`. */
function layer(files, patterns) {
  return { files, rules: { 'no-restricted-imports': ['error', { patterns }] } };
}
