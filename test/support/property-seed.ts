// One seed for every property and fuzz test of a run, from PROPERTY_SEED: CI draws a new one per
// run and prints it (.ci/run), so runs explore different inputs and any failure is reproduced
// with `PROPERTY_SEED=<seed> npm test`. Unset (a local run), the seed is 42, so a local run repeats
// itself. Loaded before every test file (vitest.config.ts setupFiles): fast-check's global seed is
// set here, and fast-check names the seed (and the path to the failing case) in every failure.
import fc from 'fast-check';

export const PROPERTY_SEED = Number(process.env.PROPERTY_SEED ?? 42);
if (!Number.isSafeInteger(PROPERTY_SEED)) throw new Error(`PROPERTY_SEED must be an integer, not ${process.env.PROPERTY_SEED}`);

fc.configureGlobal({ ...fc.readConfigureGlobal(), seed: PROPERTY_SEED });
