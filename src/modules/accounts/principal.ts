/** Who is calling: an account's root or one of its sub-accounts, identified by the credential used. */
export interface Principal {
  accountId: string;
  principalId: string;
  kind: 'root' | 'sub';
  secretId: string;
}
