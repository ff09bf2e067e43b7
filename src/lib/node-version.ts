// The Node.js versions package.json's `engines` asks for, checked at start: an older Node runs the
// service until it meets an API it lacks, so the operator is told at once rather than by a crash later.
import { readFileSync } from 'node:fs';

/** `engines.node` of package.json (src/lib and dist/lib are both two folders below it). */
export function requiredNodeRange(): string | undefined {
  try {
    const manifest = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines?: { node?: string } };
    return manifest.engines?.node;
  } catch {
    return undefined;
  }
}

/**
 * The warning for running `version` (process.version) where `range` is required, or undefined when
 * it fits. Only the `>=major[.minor[.patch]]` form package.json uses is understood; any other range
 * gives no warning rather than a wrong one.
 */
export function nodeVersionWarning(version: string, range: string | undefined): string | undefined {
  const minimum = range?.trim().match(/^>=\s*v?(\d+)(?:\.(\d+))?(?:\.(\d+))?$/);
  const running = version.match(/^v?(\d+)\.(\d+)\.(\d+)/);
  if (!minimum || !running) return undefined;
  const wanted = [1, 2, 3].map((i) => Number(minimum[i] ?? 0));
  const have = [1, 2, 3].map((i) => Number(running[i]));
  for (let i = 0; i < 3; i++) {
    if (have[i]! > wanted[i]!) return undefined;
    if (have[i]! < wanted[i]!) {
      return `Node.js ${version} is older than this service supports (package.json engines: node ${range!.trim()}): upgrade Node.js; some features may fail.`;
    }
  }
  return undefined;
}
