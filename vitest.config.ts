import { defineConfig } from 'vitest/config';

// Three projects, so CI can run the unit tests once and the integration tests on each backend
// (`vitest run --project unit`, `--project integration`, `--project browser`); `npm test` runs all.
//   unit:        pure modules, no database, no global setup;
//   integration: through the app, the CLI and the server process, on the database the global
//                setup chooses (see test/support/global-setup.ts);
//   browser:     the console (/console) in the Debian chromium, driven by playwright-core, against
//                the app on a real socket and the same databases (test/browser/).
export default defineConfig({
  test: {
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], setupFiles: ['test/support/property-seed.ts'] } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/property/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          setupFiles: ['test/support/no-concurrent-client-use.ts', 'test/support/property-seed.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'browser',
          include: ['test/browser/**/*.test.ts'],
          globalSetup: ['test/support/global-setup.ts'],
          setupFiles: ['test/support/no-concurrent-client-use.ts', 'test/support/property-seed.ts'],
        },
      },
    ],
  },
});
