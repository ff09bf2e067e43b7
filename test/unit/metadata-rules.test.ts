import { describe, expect, it } from 'vitest';
import { AFFINITY_ID_KEY, DEPLOYMENT_ID_KEY, metadataIssues, qualifiedNameProblem } from '../../src/modules/sessions/metadata-rules.js';

const keysOf = (issues: ReturnType<typeof metadataIssues>) => issues.map((issue) => issue.key);

describe('metadata keys are Kubernetes qualified names', () => {
  it.each(['env', 'example.com/agent-id', 'a', 'A_b.c-9', 'x'.repeat(63), `${'a'.repeat(63)}.${'b'.repeat(63)}/name`])('accepts %s', (key) => {
    expect(qualifiedNameProblem(key)).toBeUndefined();
  });

  it.each([
    ['', 'empty'],
    ['-env', 'name starts with a dash'],
    ['env.', 'name ends with a dot'],
    ['x'.repeat(64), 'name over 63 characters'],
    ['a/b/c', 'two slashes'],
    ['/name', 'empty prefix'],
    ['example.com/', 'empty name'],
    ['Example.com/name', 'uppercase prefix'],
    ['exa_mple.com/name', 'underscore in prefix'],
    ['has space', 'space'],
    [`${'a'.repeat(250)}/name`, 'key over 253 bytes'],
  ])('rejects %j (%s)', (key) => {
    expect(qualifiedNameProblem(key)).toEqual(expect.any(String));
  });
});

describe('metadata size rules', () => {
  it('allows empty values and at most 64 entries', () => {
    expect(metadataIssues({ env: '' })).toEqual([]);
    const sixtyFour = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`k${i}`, 'v']));
    expect(metadataIssues(sixtyFour)).toEqual([]);
    expect(metadataIssues({ ...sixtyFour, k64: 'v' })).toEqual([{ message: expect.stringContaining('64 entries') }]);
  });

  it('limits values to 1024 bytes (counting UTF-8 bytes)', () => {
    expect(metadataIssues({ env: 'x'.repeat(1024) })).toEqual([]);
    expect(keysOf(metadataIssues({ env: 'x'.repeat(1025) }))).toEqual(['env']);
    expect(keysOf(metadataIssues({ env: 'é'.repeat(513) }))).toEqual(['env']);
  });

  it('limits the whole object to 64 KiB', () => {
    const big = Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`key-${i}`, 'x'.repeat(1024)]));
    expect(metadataIssues(big)).toEqual([{ message: expect.stringContaining('bytes') }]);
  });

  it('names the bad key', () => {
    expect(metadataIssues({ ok: '1', 'bad key': '2' })).toEqual([{ key: 'bad key', message: expect.any(String) }]);
  });
});

describe('reserved namespace ags.tencentcloud.com/', () => {
  it('allows only deployment-id and affinity-id', () => {
    expect(metadataIssues({ [DEPLOYMENT_ID_KEY]: 'd1', [AFFINITY_ID_KEY]: 'a1' })).toEqual([]);
    expect(keysOf(metadataIssues({ 'ags.tencentcloud.com/other': 'x' }))).toEqual(['ags.tencentcloud.com/other']);
  });

  it('requires a non-empty deployment id for an affinity id', () => {
    expect(keysOf(metadataIssues({ [AFFINITY_ID_KEY]: 'a1' }))).toEqual([AFFINITY_ID_KEY]);
    expect(keysOf(metadataIssues({ [AFFINITY_ID_KEY]: 'a1', [DEPLOYMENT_ID_KEY]: '' }))).toEqual([AFFINITY_ID_KEY]);
  });

  const previous = { [DEPLOYMENT_ID_KEY]: 'd1', [AFFINITY_ID_KEY]: 'a1', env: 'prod' };

  it('rejects switching the deployment while keeping the old affinity', () => {
    expect(keysOf(metadataIssues({ ...previous, [DEPLOYMENT_ID_KEY]: 'd2' }, previous))).toEqual([AFFINITY_ID_KEY]);
  });

  it('rejects removing the deployment while keeping the affinity', () => {
    expect(keysOf(metadataIssues({ [AFFINITY_ID_KEY]: 'a1', env: 'prod' }, previous))).toEqual([AFFINITY_ID_KEY]);
  });

  it('accepts removing both', () => {
    expect(metadataIssues({ env: 'prod' }, previous)).toEqual([]);
  });

  it('accepts switching the deployment with a new affinity or none', () => {
    expect(metadataIssues({ ...previous, [DEPLOYMENT_ID_KEY]: 'd2', [AFFINITY_ID_KEY]: 'a2' }, previous)).toEqual([]);
    expect(metadataIssues({ [DEPLOYMENT_ID_KEY]: 'd2', env: 'prod' }, previous)).toEqual([]);
  });

  it('accepts unrelated changes that keep deployment and affinity', () => {
    expect(metadataIssues({ ...previous, env: 'dev' }, previous)).toEqual([]);
    expect(metadataIssues({ ...previous, [AFFINITY_ID_KEY]: 'a2' }, previous)).toEqual([]);
  });

  it('accepts setting a deployment and affinity where there was none', () => {
    expect(metadataIssues({ [DEPLOYMENT_ID_KEY]: 'd1', [AFFINITY_ID_KEY]: 'a1' }, { env: 'prod' })).toEqual([]);
  });
});
