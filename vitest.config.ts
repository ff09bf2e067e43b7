import { defineConfig } from 'vitest/config';
import { citusInstalled } from './test/support/private-citus.js';

// The integration suites that also run through a Citus coordinator (`--project citus`).
const CITUS_INTEGRATION_SUITES = [
  'spaces',
  'sessions-create',
  'sessions-modify',
  'sessions-list',
  'sessions-list-bytes',
  'sessions-list-pieces',
  'events-list-pieces',
  'events-list-bytes',
  'events-append',
  'events-concurrency',
  'state-at-event',
  'iam-credentials',
  'iam-subaccounts',
  'iam-concurrent-writes',
  'credential-cache',
  'tencent-api',
  'export-import',
  'event-stream',
  'event-stream-bytes',
  'expiry-sweeper',
  'stored-json-compression',
];

// Suites of the embedded server as a process, on a data folder of their own: what they test is the
// embedded default whatever the database under the other tests, so a run against TEST_DATABASE_URL
// leaves them out (there each server would also pay PGlite's initdb, where the PGlite run copies
// its migrated data folder); the PGlite run, CI's included, has them.
const EMBEDDED_SERVER_SUITES = ['data-folder-in-use', 'server-logs', 'compiled-build'];
const postgresRun = Boolean(process.env.TEST_DATABASE_URL) && process.env.TEST_DB !== 'pglite';

// Four projects, so CI can run the unit tests once and the integration tests on each backend
// (`vitest run --project unit`, `--project integration`, `--project browser`); `npm test` runs all.
//   unit:        pure modules, no database, no global setup;
//   integration: through the app, the CLI and the server process, on the database the global
//                setup chooses (see test/support/global-setup.ts);
//   citus:       test/citus/ and the integration suites above, through the coordinator of a private
//                Citus cluster (test/support/citus-global-setup.ts);
//   browser:     the console (/console) in the Debian chromium, driven by playwright-core, against
//                the app on a real socket and the same databases (test/browser/).
export default defineConfig({
  test: {
    pool: 'forks',
    // One worker process runs its files one after the other instead of a new process per file:
    // each file still opens its own database, app and servers, and closes them (no test file mocks
    // a module or stubs a global; the one with fake timers restores real ones after each test),
    // but the worker loads Fastify, Kysely, zod and PGlite's WebAssembly once. On CI's two cores
    // that took a fifth off the PGlite run (399 s to 322 s, 483 s to 387 s of CPU), the run CI
    // waits for.
    isolate: false,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // expect.poll waits for what other processes and connections do (a request reaching a lock, a
    // slot, a metric): vitest's default bound of one second was missed on a loaded CI machine
    // (export-fair-share, 2026-12-07). A poll that succeeds returns at once, so a longer bound
    // costs only a test that fails anyway.
    expect: { poll: { timeout: 15_000 } },
    projects: [
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'], setupFiles: ['test/support/property-seed.ts'] } },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts', 'test/property/**/*.test.ts'],
          exclude: postgresRun ? EMBEDDED_SERVER_SUITES.map((name) => `test/integration/${name}.test.ts`) : [],
          globalSetup: ['test/support/global-setup.ts'],
          setupFiles: ['test/support/no-concurrent-client-use.ts', 'test/support/property-seed.ts'],
        },
      },
      // Only where Citus is installed (../shared/citus/build.sh), so that `npm test` passes on any
      // machine; CI builds it and asks for the project by name, which fails if it is missing.
      ...(citusInstalled() ? [{
        extends: true as const,
        test: {
          name: 'citus',
          // docs/scale-out.md §4 says which suites run here and why the others do not.
          include: ['test/citus/**/*.test.ts', ...CITUS_INTEGRATION_SUITES.map((name) => `test/integration/${name}.test.ts`)],
          globalSetup: ['test/support/citus-global-setup.ts'],
          setupFiles: ['test/support/no-concurrent-client-use.ts', 'test/support/property-seed.ts'],
        },
      }] : []),
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
