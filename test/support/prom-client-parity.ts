// The instruments kept as plain numbers (src/lib/tally.ts) must expose what prom-client's own would
// for the same observations: prom-client, fed them the old way, is the reference.
import fc from 'fast-check';
import { expect } from 'vitest';

/**
 * Feeds up to 60 observations drawn from `observation`, 200 times, to `ours` and to `promClient`
 * (each answering its registry's exposition) and requires the two texts to match line for line.
 */
export async function expectPromClientExposition<T>(observation: fc.Arbitrary<T>, ours: (observations: T[]) => Promise<string>, promClient: (observations: T[]) => Promise<string>): Promise<void> {
  await fc.assert(
    fc.asyncProperty(fc.array(observation, { maxLength: 60 }), async (observations) => {
      expect(await ours(observations)).toBe(await promClient(observations));
    }),
    { numRuns: 200 },
  );
}
