import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'data/', 'coverage/', 'openapi/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
      'no-restricted-syntax': ['error', { selector: 'TSEnumDeclaration', message: 'Use `as const` objects, not enums.' }],
    },
  },
  {
    // Layering (STYLE.md): routes never touch Kysely, repositories never touch Fastify.
    files: ['src/**/*.routes.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'kysely', message: 'Routes call services; queries live in repositories.' }] }] },
  },
  {
    files: ['src/**/*.repository.ts'],
    rules: { 'no-restricted-imports': ['error', { paths: [{ name: 'fastify', message: 'Repositories know nothing of HTTP.' }] }] },
  },
);
