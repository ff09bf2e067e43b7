// The keys that address a space's user and a session. Every query is scoped by the full key,
// account first: the primary keys and indexes lead with account_id.

export interface UserKey {
  accountId: string;
  spaceId: string;
  userId: string;
}

export interface SessionKey extends UserKey {
  sessionId: string;
}
