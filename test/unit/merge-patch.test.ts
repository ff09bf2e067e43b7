import { describe, expect, it } from 'vitest';
import { applyMergePatch } from '../../src/modules/state/merge-patch.js';
import { APPENDIX_A } from '../support/merge-patch-cases.js';

describe('applyMergePatch (RFC 7396)', () => {
  it('has all 15 examples of Appendix A', () => {
    expect(APPENDIX_A).toHaveLength(15);
  });

  it.each(APPENDIX_A.map(([original, patch, result], index) => ({ n: index + 1, original, patch, result })))(
    'Appendix A example $n: $original + $patch',
    ({ original, patch, result }) => {
      expect(applyMergePatch(original, patch)).toEqual(result);
    },
  );

  it('never mutates the target or the patch', () => {
    const target = { a: { b: 1, c: 2 }, d: [1] };
    const patch = { a: { b: null, e: { f: 1 } }, d: null };
    const before = structuredClone({ target, patch });
    applyMergePatch(target, patch);
    expect({ target, patch }).toEqual(before);
  });
});
