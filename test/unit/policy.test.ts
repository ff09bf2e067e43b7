// Policy evaluation (docs/design.md §2): default deny, explicit deny wins, `*` inside action names,
// `space/*` and `space/<id>` resources; what a list may show; validation of policy documents.
import { describe, expect, it } from 'vitest';
import {
  ACCOUNT_RESOURCE,
  NEW_SPACE_RESOURCE,
  PolicyDocument,
  type PolicyStatementValue,
  isAllowed,
  spaceResource,
  visibleSpaces,
} from '../../src/lib/policy.js';

const A = 'space-00000000-0000-4000-8000-00000000000a';
const B = 'space-00000000-0000-4000-8000-00000000000b';
const C = 'space-00000000-0000-4000-8000-00000000000c';

const allow = (actions: string[], resources: string[]): PolicyStatementValue => ({ effect: 'allow', actions, resources });
const deny = (actions: string[], resources: string[]): PolicyStatementValue => ({ effect: 'deny', actions, resources });

describe('isAllowed', () => {
  it('denies by default: no statements, or none that matches', () => {
    expect(isAllowed([], 'session:DescribeSessions', spaceResource(A))).toBe(false);
    expect(isAllowed([allow(['session:DescribeEvents'], [`space/${A}`])], 'session:DescribeSessions', spaceResource(A))).toBe(false);
    expect(isAllowed([allow(['session:DescribeSessions'], [`space/${B}`])], 'session:DescribeSessions', spaceResource(A))).toBe(false);
  });

  it('allows an exact action on an exact space', () => {
    expect(isAllowed([allow(['session:DescribeSessions'], [`space/${A}`])], 'session:DescribeSessions', spaceResource(A))).toBe(true);
  });

  it('lets an explicit deny win over any allow, in any order', () => {
    const statements = [allow(['session:*'], ['*']), deny(['session:DeleteSession'], [`space/${A}`])];
    expect(isAllowed(statements, 'session:DeleteSession', spaceResource(A))).toBe(false);
    expect(isAllowed([...statements].reverse(), 'session:DeleteSession', spaceResource(A))).toBe(false);
    expect(isAllowed(statements, 'session:DeleteSession', spaceResource(B))).toBe(true);
    expect(isAllowed(statements, 'session:DescribeSessions', spaceResource(A))).toBe(true);
  });

  it('lets a deny on space/* win over an allow on one space', () => {
    const statements = [allow(['session:DescribeSessions'], [`space/${A}`]), deny(['session:Describe*'], ['space/*'])];
    expect(isAllowed(statements, 'session:DescribeSessions', spaceResource(A))).toBe(false);
  });

  it.each([
    ['session:Describe*', 'session:DescribeSessions', true],
    ['session:Describe*', 'session:DescribeSessionSpaces', true],
    ['session:Describe*', 'session:DescribeEvents', true],
    ['session:Describe*', 'session:ModifySession', false],
    ['session:*Session', 'session:DeleteSession', true],
    ['session:*Session', 'session:DeleteSessionSpace', false],
    ['session:*', 'session:AppendEvent', true],
    ['session:*', 'iam:PutPolicy', false],
    ['*', 'session:ImportSession', true],
    ['iam:*', 'session:DescribeSessions', false],
  ] as const)('matches the action pattern %s against %s: %s', (pattern, action, expected) => {
    expect(isAllowed([allow([pattern], ['*'])], action, spaceResource(A))).toBe(expected);
  });

  it('distinguishes space/<id>, space/* and *', () => {
    const onA = [allow(['*'], [`space/${A}`])];
    expect(isAllowed(onA, 'session:ModifySession', spaceResource(A))).toBe(true);
    expect(isAllowed(onA, 'session:ModifySession', spaceResource(B))).toBe(false);
    // Creating a space is evaluated on space/*, which a statement on one space does not cover.
    expect(isAllowed(onA, 'session:CreateSessionSpace', NEW_SPACE_RESOURCE)).toBe(false);

    const onAll = [allow(['*'], ['space/*'])];
    expect(isAllowed(onAll, 'session:ModifySession', spaceResource(B))).toBe(true);
    expect(isAllowed(onAll, 'session:CreateSessionSpace', NEW_SPACE_RESOURCE)).toBe(true);

    const everything = [allow(['*'], ['*'])];
    expect(isAllowed(everything, 'session:ModifySession', spaceResource(C))).toBe(true);
    expect(isAllowed(everything, 'session:CreateSessionSpace', NEW_SPACE_RESOURCE)).toBe(true);
  });

  it('reaches IAM actions only through a statement on the resource *', () => {
    expect(isAllowed([allow(['iam:*'], ['space/*'])], 'iam:PutPolicy', ACCOUNT_RESOURCE)).toBe(false);
    expect(isAllowed([allow(['iam:*'], [`space/${A}`])], 'iam:PutPolicy', ACCOUNT_RESOURCE)).toBe(false);
    expect(isAllowed([allow(['iam:*'], ['*'])], 'iam:PutPolicy', ACCOUNT_RESOURCE)).toBe(true);
    expect(isAllowed([allow(['iam:Describe*'], ['*'])], 'iam:PutPolicy', ACCOUNT_RESOURCE)).toBe(false);
    expect(isAllowed([allow(['*'], ['*']), deny(['iam:*'], ['*'])], 'iam:DescribeSubAccounts', ACCOUNT_RESOURCE)).toBe(false);
    // session:* never reaches the account, even on *.
    expect(isAllowed([allow(['session:*'], ['*'])], 'iam:CreateCredential', ACCOUNT_RESOURCE)).toBe(false);
  });

  it('treats the characters of a pattern other than * literally', () => {
    expect(isAllowed([allow(['session.Describe.*'], ['*'])], 'session:DescribeSessions', spaceResource(A))).toBe(false);
  });
});

describe('visibleSpaces', () => {
  const LIST = 'session:DescribeSessionSpaces' as const;

  it('shows nothing without statements or without a matching action', () => {
    expect(visibleSpaces([], LIST)).toEqual({ kind: 'only', spaceIds: [] });
    expect(visibleSpaces([allow(['session:DescribeEvents'], ['*'])], LIST)).toEqual({ kind: 'only', spaceIds: [] });
  });

  it('shows only the spaces allowed one by one, minus the denied ones', () => {
    const statements = [allow([LIST], [`space/${A}`, `space/${B}`]), allow(['session:Describe*'], [`space/${A}`]), deny([LIST], [`space/${B}`])];
    expect(visibleSpaces(statements, LIST)).toEqual({ kind: 'only', spaceIds: [A] });
  });

  it.each(['*', 'space/*'])('shows every space but the denied ones when allowed on %s', (resource) => {
    expect(visibleSpaces([allow(['session:*'], [resource])], LIST)).toEqual({ kind: 'all-except', spaceIds: [] });
    expect(visibleSpaces([allow(['*'], [resource]), deny([LIST], [`space/${C}`])], LIST)).toEqual({ kind: 'all-except', spaceIds: [C] });
  });

  it.each(['*', 'space/*'])('shows nothing when denied on %s, whatever is allowed', (resource) => {
    expect(visibleSpaces([allow(['*'], ['*']), allow([LIST], [`space/${A}`]), deny(['session:Describe*'], [resource])], LIST)).toEqual({
      kind: 'only',
      spaceIds: [],
    });
  });

  it('agrees with isAllowed on every space', () => {
    const statements = [allow(['session:Describe*'], ['space/*']), deny([LIST], [`space/${B}`])];
    const visibility = visibleSpaces(statements, LIST);
    for (const id of [A, B, C]) {
      const visible = visibility.kind === 'all-except' ? !visibility.spaceIds.includes(id) : visibility.spaceIds.includes(id);
      expect(visible).toBe(isAllowed(statements, LIST, spaceResource(id)));
    }
  });
});

describe('PolicyDocument', () => {
  const issuesOf = (document: unknown) => {
    const result = PolicyDocument.safeParse(document);
    expect(result.success).toBe(false);
    return result.error?.issues.map((issue) => ({ path: issue.path.join('.'), message: issue.message })) ?? [];
  };

  it('accepts a read-only policy on one space', () => {
    const document = { statements: [{ effect: 'allow', actions: ['session:Describe*'], resources: [`space/${A}`] }] };
    expect(PolicyDocument.parse(document)).toEqual(document);
  });

  it('rejects an unknown action name, naming its path', () => {
    const issues = issuesOf({ statements: [{ effect: 'allow', actions: ['session:DescribeSessions', 'session:ReadEverything'], resources: ['*'] }] });
    expect(issues).toEqual([{ path: 'statements.0.actions.1', message: expect.stringContaining('no known action') }]);
  });

  it.each(['session:Describe Sessions', 'storage:*', 'session:', 'session:Describe?'])('rejects the malformed action %j', (action) => {
    const issues = issuesOf({ statements: [{ effect: 'allow', actions: [action], resources: ['*'] }] });
    expect(issues.map((issue) => issue.path)).toContain('statements.0.actions.0');
  });

  it.each(['space/A', 'space', `space/${A}/sessions`, 'account', 'space/**', `${A}`, ''])('rejects the malformed resource %j', (resource) => {
    const issues = issuesOf({ statements: [{ effect: 'deny', actions: ['*'], resources: ['*', resource] }] });
    expect(issues.map((issue) => issue.path)).toEqual(['statements.0.resources.1']);
  });

  it('rejects an empty statement list, and empty actions or resources', () => {
    expect(issuesOf({ statements: [] }).map((issue) => issue.path)).toEqual(['statements']);
    expect(issuesOf({ statements: [{ effect: 'allow', actions: [], resources: [] }] }).map((issue) => issue.path)).toEqual([
      'statements.0.actions',
      'statements.0.resources',
    ]);
  });

  it('rejects an unknown effect and unknown fields', () => {
    expect(issuesOf({ statements: [{ effect: 'permit', actions: ['*'], resources: ['*'] }] }).map((issue) => issue.path)).toEqual(['statements.0.effect']);
    expect(issuesOf({ statements: [{ effect: 'allow', actions: ['*'], resources: ['*'], condition: {} }] })).toHaveLength(1);
    expect(issuesOf({ version: '2012-10-17', statements: [{ effect: 'allow', actions: ['*'], resources: ['*'] }] })).toHaveLength(1);
  });
});
