/* global console, process, URL */
// `npm ci` runs this (the root package's `prepare`): it builds the console into console/dist, so
// `npm ci && npm start` serves /console with no other step. An install without dev dependencies
// (the Docker runtime stage: `npm ci --omit=dev`) has no Vite; it skips, and takes the console
// built in the build stage.
let vite;
try {
  vite = await import('vite');
} catch {
  console.log('console: Vite is not installed (no dev dependencies); not building the console.');
  process.exit(0);
}
await vite.build({ configFile: new URL('../console/vite.config.ts', import.meta.url).pathname });
console.log('console: built console/dist (served at /console).');
