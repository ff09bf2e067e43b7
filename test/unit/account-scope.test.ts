import { describe, expect, it } from 'vitest';
import { currentAccount, runForAccount, runForNoAccount } from '../../src/lib/account-scope.js';

describe('account scope', () => {
  it('carries the account through awaits, and runForNoAccount drops it for what it starts only', async () => {
    expect(currentAccount()).toBeUndefined();
    await runForAccount('acct-a', async () => {
      await Promise.resolve();
      expect(currentAccount()).toBe('acct-a');
      const started = runForNoAccount(async () => {
        expect(currentAccount()).toBeUndefined();
        await new Promise((resolve) => setTimeout(resolve, 1));
        return currentAccount();
      });
      // Back in the request's own scope at once, while the shared work goes on.
      expect(currentAccount()).toBe('acct-a');
      expect(await started).toBeUndefined();
      expect(currentAccount()).toBe('acct-a');
      // A request started from shared work gets its own account again.
      expect(await runForNoAccount(() => runForAccount('acct-b', async () => currentAccount()))).toBe('acct-b');
    });
    expect(currentAccount()).toBeUndefined();
  });
});
