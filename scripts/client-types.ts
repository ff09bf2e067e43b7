// `npm run client:types` regenerates clients/typescript/src/generated/openapi.ts from the committed
// openapi/openapi.json (run it after `npm run openapi`); test/unit/client-types.test.ts fails when
// the committed file is stale.
import { writeFile } from 'node:fs/promises';
import { CLIENT_TYPES_FILE, generateClientTypes } from './client-types-source.js';

await writeFile(CLIENT_TYPES_FILE, await generateClientTypes());
console.log('wrote clients/typescript/src/generated/openapi.ts');
