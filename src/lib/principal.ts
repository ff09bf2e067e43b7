import type { PolicyStatementValue } from './policy.js';

/** Who is calling: an account's root or one of its sub-accounts, identified by the credential used. */
export interface Principal {
  accountId: string;
  principalId: string;
  kind: 'root' | 'sub';
  secretId: string;
  /** A sub-account's policy statements (none: it may do nothing). The root has no policy: it may do everything. */
  statements: PolicyStatementValue[];
}
