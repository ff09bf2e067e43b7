// `npm run openapi` writes openapi/openapi.json from the route schemas; `npm run openapi:check`
// fails when the committed file differs from what the code describes.
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { buildApp } from '../src/app.js';
import { DEFAULT_LIMITS } from '../src/config.js';
import { openDatabase } from '../src/db/connect.js';

const FILE = new URL('../openapi/openapi.json', import.meta.url);

async function generate(): Promise<string> {
  // The document needs the routes, not a database: this pool is never connected.
  const database = await openDatabase({ kind: 'postgres', url: 'postgres://openapi@127.0.0.1:1/none', poolMax: 1, statementTimeoutMs: 1000, connectTimeoutMs: 1000 });
  const app = await buildApp({ db: database.db, pageTokenKey: randomBytes(32), limits: DEFAULT_LIMITS });
  await app.ready();
  const document = JSON.stringify(app.swagger(), null, 2) + '\n';
  await app.close();
  await database.close();
  return document;
}

const mode = process.argv[2];
const document = await generate();
if (mode === 'write') {
  await writeFile(FILE, document);
  console.log('wrote openapi/openapi.json');
} else if (mode === 'check') {
  const committed = await readFile(FILE, 'utf8').catch(() => '');
  if (committed !== document) {
    console.error('openapi/openapi.json is stale: run `npm run openapi` and commit the result.');
    process.exit(1);
  }
  console.log('openapi/openapi.json is current');
} else {
  console.error('usage: tsx scripts/openapi.ts write|check');
  process.exit(2);
}
