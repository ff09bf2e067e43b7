import { describe, expect, it } from 'vitest';
import { nodeVersionWarning, requiredNodeRange } from '../../src/lib/node-version.js';

describe('nodeVersionWarning', () => {
  it('reads the range from package.json', () => {
    expect(requiredNodeRange()).toBe('>=22');
  });

  it('warns below the minimum, naming the running version and the range', () => {
    expect(nodeVersionWarning('v20.20.2', '>=22')).toBe(
      'Node.js v20.20.2 is older than this service supports (package.json engines: node >=22): upgrade Node.js; some features may fail.',
    );
    expect(nodeVersionWarning('v22.11.9', '>=22.12')).toMatch(/^Node.js v22.11.9 is older/);
    expect(nodeVersionWarning('v22.12.0', '>= 22.12.1')).toMatch(/^Node.js v22.12.0 is older/);
  });

  it('is silent at or above the minimum', () => {
    for (const version of ['v22.0.0', 'v22.12.0', 'v24.1.0', 'v30.0.0']) expect(nodeVersionWarning(version, '>=22')).toBeUndefined();
    expect(nodeVersionWarning('v22.12.0', '>=22.12.0')).toBeUndefined();
  });

  it('says nothing about a range it does not understand rather than something wrong', () => {
    expect(nodeVersionWarning('v20.0.0', '^22 || ^24')).toBeUndefined();
    expect(nodeVersionWarning('v20.0.0', undefined)).toBeUndefined();
  });
});
