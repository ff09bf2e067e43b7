export type TestBackend = { kind: 'pglite' } | { kind: 'postgres'; adminUrl: string; template: string; source: string };

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
