// What the rest of the service knows of a credential and of the account's root principal.
import type { CredentialRow } from '../../db/schema.js';

/** The principal id of an account's root user (its own credentials, not a sub-account's). */
export const ROOT_PRINCIPAL_ID = 'root';

/** A credential as it is listed: never its secret. */
export type ListedCredential = Pick<CredentialRow, 'secret_id' | 'principal_id' | 'status' | 'create_time' | 'last_used_time'>;

/** The columns of ListedCredential, for the queries that select or return one. */
export const LISTED_CREDENTIAL_COLUMNS = ['secret_id', 'principal_id', 'status', 'create_time', 'last_used_time'] as const satisfies readonly (keyof ListedCredential)[];
