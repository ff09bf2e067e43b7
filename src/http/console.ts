// Serves the admin console (console/, issue 13) at /console: the files Vite built into console/dist,
// read once at start-up (a few hundred KiB) and answered from memory. The console talks to /v1 with
// the signed-in credential as a Bearer header; these files are public, like /docs.
import { readdir, readFile } from 'node:fs/promises';
import { extname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** src/http → ../../console/dist, and likewise dist/http → ../../console/dist in a build. */
export const CONSOLE_DIST = fileURLToPath(new URL('../../console/dist/', import.meta.url));

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
};

// Only the console's own files run; it calls only this origin; no page may frame it.
const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

async function readTree(dir: string): Promise<Map<string, Buffer>> {
  const files = new Map<string, Buffer>();
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  for (const entry of entries) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files.set(relative(dir, path).split('\\').join('/'), await readFile(path));
  }
  return files;
}

export async function registerConsole(app: FastifyInstance, dir: string = CONSOLE_DIST): Promise<void> {
  const files = await readTree(dir);
  const index = files.get('index.html');

  const serve = async (request: FastifyRequest, reply: FastifyReply) => {
    reply
      .header('content-security-policy', CONTENT_SECURITY_POLICY)
      .header('x-content-type-options', 'nosniff')
      .header('referrer-policy', 'no-referrer')
      .header('x-frame-options', 'DENY');
    if (!index) {
      return reply
        .code(503)
        .type('text/plain; charset=utf-8')
        .send('The console is not built. Run `npm run console:build` (npm ci runs it), then restart the service.\n');
    }
    const path = (request.params as { '*'?: string })['*'] ?? '';
    if (path === '' || path === 'index.html') return reply.type(TYPES['.html']!).header('cache-control', 'no-cache').send(index);
    const file = files.get(path);
    if (!file) return reply.code(404).type('text/plain; charset=utf-8').send('Not found\n');
    // Vite names built assets by their content hash: a name never changes meaning.
    const cache = path.startsWith('assets/') ? 'public, max-age=31536000, immutable' : 'no-cache';
    return reply.type(TYPES[extname(path)] ?? 'application/octet-stream').header('cache-control', cache).send(file);
  };
  // The router ignores trailing slashes: /console and /console/ are the first route, files the second.
  app.get('/console', { schema: { hide: true } }, serve);
  app.get('/console/*', { schema: { hide: true } }, serve);
}
