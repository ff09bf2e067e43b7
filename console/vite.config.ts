// The console's build: served by the service at /console (src/http/console.ts) from console/dist,
// which `npm ci` builds (the root package's `prepare` script) and nothing commits.
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

const here = (path: string) => fileURLToPath(new URL(path, import.meta.url));

export default defineConfig({
  root: here('.'),
  base: '/console/',
  // The project's own client, from its sources: typed by the generated OpenAPI types.
  resolve: { alias: { 'agent-session-client': here('../clients/typescript/src/index.ts') } },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: { outDir: here('dist'), emptyOutDir: true, sourcemap: true, target: 'es2022' },
  logLevel: 'warn',
});
