export type TestBackend =
  /**
   * `snapshot`: a tarball of a migrated PGlite data directory (`dumpDataDir()`), which each test
   * file restores instead of running initdb and the migrations; `dataDir`: the same migrated data
   * directory on disk, for tests that run a process on a data directory of their own (copy it).
   */
  | { kind: 'pglite'; snapshot: string; dataDir: string }
  | {
      kind: 'postgres';
      adminUrl: string;
      template: string;
      source: string;
      /**
       * On a Citus cluster (test/support/citus-global-setup.ts): the workers' servers, where the
       * template is cloned too, under the same name as on the coordinator (adminUrl).
       */
      workerAdminUrls?: string[];
    };

declare module 'vitest' {
  export interface ProvidedContext {
    testBackend: TestBackend;
  }
}

export function withDatabase(url: string, database: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${database}`;
  return parsed.toString();
}
