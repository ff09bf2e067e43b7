// The policy language itself is pure and lives in src/lib/policy.ts, where src/http can reach it
// without importing a module. This re-export keeps test/support/principals.ts compiling until it
// imports src/lib/policy.js directly.
export type { PolicyStatementValue } from '../../lib/policy.js';
