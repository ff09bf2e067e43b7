// Session metadata rules (docs/design.md §4.5). Pure: the service feeds in the metadata a request would leave
// behind and the metadata it replaces, and turns the issues into one InvalidParameter.Metadata.
// Rules about the reserved namespace compare the two, because they are about what a change does
// (switching a deployment), not only about the result.

export type Metadata = Record<string, string>;

export const METADATA_LIMITS = {
  entries: 64,
  keyBytes: 253,
  prefixBytes: 253,
  nameChars: 63,
  valueBytes: 1024,
  totalBytes: 64 * 1024,
} as const;

export const RESERVED_PREFIX = 'ags.tencentcloud.com/';
export const DEPLOYMENT_ID_KEY = `${RESERVED_PREFIX}deployment-id`;
export const AFFINITY_ID_KEY = `${RESERVED_PREFIX}affinity-id`;
const RESERVED_KEYS: ReadonlySet<string> = new Set([DEPLOYMENT_ID_KEY, AFFINITY_ID_KEY]);

/** The one rule about a value rather than a key (the API 3.0 face names the item's Value for it). */
export const VALUE_TOO_LONG = `values must be at most ${METADATA_LIMITS.valueBytes} bytes`;

/** One violated rule; `key` is absent when the rule is about the whole object. */
export interface MetadataIssue {
  key?: string;
  message: string;
}

// Kubernetes qualified names: an optional DNS-subdomain prefix, then a name of at most 63 characters.
const NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/** Why `key` is not a qualified name, or undefined when it is one. */
export function qualifiedNameProblem(key: string): string | undefined {
  if (key.length === 0) return 'keys must not be empty';
  if (bytes(key) > METADATA_LIMITS.keyBytes) return `keys must be at most ${METADATA_LIMITS.keyBytes} bytes`;
  const parts = key.split('/');
  if (parts.length > 2) return 'keys are [prefix/]name with at most one "/"';
  const name = parts.length === 2 ? parts[1]! : parts[0]!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix.length === 0) return 'the prefix before "/" must not be empty';
    if (bytes(prefix) > METADATA_LIMITS.prefixBytes || !prefix.split('.').every((label) => label.length <= 63 && DNS_LABEL.test(label))) {
      return 'the prefix must be a DNS subdomain: lowercase labels of a–z, 0–9 and "-", separated by "."';
    }
  }
  if (name.length === 0) return 'the name must not be empty';
  if (name.length > METADATA_LIMITS.nameChars) return `the name must be at most ${METADATA_LIMITS.nameChars} characters`;
  if (!NAME.test(name)) return 'the name must be A–Z, a–z, 0–9, "-", "_" or ".", beginning and ending with a letter or digit';
  return undefined;
}

/**
 * Every rule `next` breaks, given that it replaces `previous` (`{}` for a new session).
 * An empty list means the metadata may be stored.
 */
export function metadataIssues(next: Metadata, previous: Metadata = {}): MetadataIssue[] {
  const issues: MetadataIssue[] = [];
  const entries = Object.entries(next);
  if (entries.length > METADATA_LIMITS.entries) issues.push({ message: `at most ${METADATA_LIMITS.entries} entries are allowed, got ${entries.length}` });
  if (bytes(JSON.stringify(next)) > METADATA_LIMITS.totalBytes) issues.push({ message: `the serialized object must be at most ${METADATA_LIMITS.totalBytes} bytes` });

  for (const [key, value] of entries) {
    const problem = qualifiedNameProblem(key);
    if (problem) issues.push({ key, message: problem });
    else if (key.startsWith(RESERVED_PREFIX) && !RESERVED_KEYS.has(key)) {
      issues.push({ key, message: `the ${RESERVED_PREFIX} namespace is reserved: only ${DEPLOYMENT_ID_KEY} and ${AFFINITY_ID_KEY} are allowed` });
    }
    if (bytes(value) > METADATA_LIMITS.valueBytes) issues.push({ key, message: VALUE_TOO_LONG });
  }
  issues.push(...affinityIssues(next, previous));
  return issues;
}

function affinityIssues(next: Metadata, previous: Metadata): MetadataIssue[] {
  const affinity = next[AFFINITY_ID_KEY];
  if (affinity === undefined) return [];
  const deployment = next[DEPLOYMENT_ID_KEY];
  if (deployment === undefined || deployment === '') {
    return [{ key: AFFINITY_ID_KEY, message: `an affinity id requires a non-empty ${DEPLOYMENT_ID_KEY}` }];
  }
  // An affinity id is only meaningful for the deployment it was issued by: moving the session to
  // another deployment must drop or replace it in the same change.
  const previousDeployment = previous[DEPLOYMENT_ID_KEY];
  const deploymentChanged = previousDeployment !== undefined && previousDeployment !== deployment;
  if (deploymentChanged && previous[AFFINITY_ID_KEY] === affinity) {
    return [{ key: AFFINITY_ID_KEY, message: `${DEPLOYMENT_ID_KEY} changed: remove or replace the affinity id in the same request` }];
  }
  return [];
}
