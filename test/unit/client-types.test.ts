// The client's types are generated, never hand-edited: the committed file is what openapi-typescript
// makes of the committed OpenAPI document (regenerate with `npm run client:types`).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CLIENT_TYPES_FILE, generateClientTypes } from '../../scripts/client-types-source.js';

describe('clients/typescript/src/generated/openapi.ts', () => {
  it('is current with openapi/openapi.json (else run `npm run client:types`)', async () => {
    expect(readFileSync(CLIENT_TYPES_FILE, 'utf8') === (await generateClientTypes())).toBe(true);
  }, 60_000);
});
