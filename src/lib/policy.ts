// Policies of sub-accounts (docs/design.md §2): statements of { effect, actions, resources }. Default deny;
// any matching deny wins; else any matching allow allows. Pure: no I/O.
import { z } from 'zod';

export const SESSION_ACTIONS = [
  'session:CreateSessionSpace',
  'session:DescribeSessionSpaces',
  'session:ModifySessionSpace',
  'session:DeleteSessionSpace',
  'session:CreateSession',
  'session:DescribeSessions',
  'session:ModifySession',
  'session:DeleteSession',
  'session:AppendEvent',
  'session:DescribeEvents',
  'session:ExportSession',
  'session:ImportSession',
] as const;

export const IAM_ACTIONS = [
  'iam:CreateSubAccount',
  'iam:DescribeSubAccounts',
  'iam:DeleteSubAccount',
  'iam:PutPolicy',
  'iam:GetPolicy',
  'iam:CreateCredential',
  'iam:DescribeCredentials',
  'iam:ModifyCredential',
  'iam:DeleteCredential',
] as const;

export type SessionAction = (typeof SESSION_ACTIONS)[number];
export const ACTIONS = [...SESSION_ACTIONS, ...IAM_ACTIONS] as const;
export type Action = (typeof ACTIONS)[number];

/**
 * The resource an action is evaluated on: `space/<spaceId>` for anything inside a space, `space/*`
 * for creating a space (it has no id yet), and `account` for IAM operations, which only a
 * statement on `*` reaches.
 */
export type Resource = `space/${string}` | 'account';
export const spaceResource = (spaceId: string): Resource => `space/${spaceId}`;
export const NEW_SPACE_RESOURCE: Resource = 'space/*';
export const ACCOUNT_RESOURCE: Resource = 'account';

const ACTION_PATTERN = /^(session|iam):[A-Za-z*]+$|^\*$/;
const RESOURCE_PATTERN = /^\*$|^space\/\*$|^space\/space-[0-9a-f-]{36}$/;

const matchesAnyKnownAction = (pattern: string) => ACTIONS.some((action) => globMatches(pattern, action));

export const PolicyStatement = z.strictObject({
  effect: z.enum(['allow', 'deny']),
  actions: z
    .array(
      z
        .string()
        .regex(ACTION_PATTERN, {
          message: 'must be an action name such as session:DescribeSessions, with optional * wildcards (session:Describe*, session:*)',
          abort: true, // a malformed name is not also reported as "matches no known action"
        })
        .refine(matchesAnyKnownAction, 'matches no known action'),
    )
    .min(1)
    .max(50),
  resources: z.array(z.string().regex(RESOURCE_PATTERN, 'must be space/<spaceId>, space/* or *')).min(1).max(100),
});

export const PolicyDocument = z
  .strictObject({ statements: z.array(PolicyStatement).min(1).max(50) })
  .meta({ id: 'Policy', description: 'Default deny; any matching deny wins; else any matching allow allows.' });

export type PolicyStatementValue = z.infer<typeof PolicyStatement>;

/** `*` in a pattern stands for any run of characters; everything else is literal. */
export function globMatches(pattern: string, value: string): boolean {
  if (!pattern.includes('*')) return pattern === value;
  const regex = new RegExp(`^${pattern.split('*').map(escapeRegex).join('.*')}$`);
  return regex.test(value);
}

const escapeRegex = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

const statementMatches = (statement: PolicyStatementValue, action: Action, resource: Resource) =>
  statement.actions.some((pattern) => globMatches(pattern, action)) &&
  statement.resources.some((pattern) => globMatches(pattern, resource));

export function isAllowed(statements: readonly PolicyStatementValue[], action: Action, resource: Resource): boolean {
  const matching = statements.filter((statement) => statementMatches(statement, action, resource));
  return matching.length > 0 && matching.every((statement) => statement.effect === 'allow');
}

/**
 * Which spaces a list may show, as a condition a query can apply in SQL: every space but some,
 * or only some.
 */
export type SpaceVisibility = { kind: 'all-except'; spaceIds: string[] } | { kind: 'only'; spaceIds: string[] };

export function visibleSpaces(statements: readonly PolicyStatementValue[], action: Action): SpaceVisibility {
  const relevant = statements.filter((statement) => statement.actions.some((pattern) => globMatches(pattern, action)));
  const ids = (effect: 'allow' | 'deny') =>
    relevant
      .filter((statement) => statement.effect === effect)
      .flatMap((statement) => statement.resources)
      .filter((resource) => resource.startsWith('space/space-'))
      .map((resource) => resource.slice('space/'.length));
  const covers = (effect: 'allow' | 'deny') =>
    relevant.some((statement) => statement.effect === effect && statement.resources.some((resource) => resource === '*' || resource === 'space/*'));

  if (covers('deny')) return { kind: 'only', spaceIds: [] };
  const denied = new Set(ids('deny'));
  if (covers('allow')) return { kind: 'all-except', spaceIds: [...denied] };
  return { kind: 'only', spaceIds: [...new Set(ids('allow'))].filter((id) => !denied.has(id)) };
}

/** The session actions `principal` may perform on `spaceId` (all of them for the root): what a console may offer. */
export function allowedSpaceActions(principal: { kind: 'root' | 'sub'; statements: readonly PolicyStatementValue[] }, spaceId: string): SessionAction[] {
  if (principal.kind === 'root') return [...SESSION_ACTIONS];
  return SESSION_ACTIONS.filter((action) => isAllowed(principal.statements, action, spaceResource(spaceId)));
}
