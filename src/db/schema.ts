// Kysely table types. They mirror migrations/*.sql; the migrations are the source of truth.
import type { ColumnType, Generated, Selectable } from 'kysely';

export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

/** jsonb columns: read as parsed JSON, written as a JSON string (pg would send JS arrays as PG arrays). */
type NullableJsonb<T> = ColumnType<T | null, string | null, string | null>;
/** bigint counters: pg returns int8 as string; we parse them to numbers at the boundary (see connect.ts). */
type Counter = ColumnType<number, number | undefined, number>;
type Timestamp = ColumnType<Date, Date | string | undefined, Date | string>;

export interface AccountsTable {
  account_id: string;
  name: string;
  create_time: Generated<Date>;
}

export interface PrincipalsTable {
  account_id: string;
  principal_id: string;
  kind: 'root' | 'sub';
  name: string;
  create_time: Generated<Date>;
}

export interface CredentialsTable {
  secret_id: string;
  account_id: string;
  principal_id: string;
  secret_hash: Buffer;
  status: ColumnType<'enabled' | 'disabled', 'enabled' | 'disabled' | undefined, 'enabled' | 'disabled'>;
  create_time: Generated<Date>;
  last_used_time: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** AES-256-GCM (iv ‖ tag ‖ ciphertext) of the secret key under CREDENTIAL_MASTER_KEY; null without a key. */
  secret_encrypted: ColumnType<Buffer | null, Buffer | null | undefined, Buffer | null>;
}

export interface PoliciesTable {
  account_id: string;
  principal_id: string;
  statements: ColumnType<PolicyStatementRow[], string, string>;
  update_time: Timestamp;
}

export interface PolicyStatementRow {
  effect: 'allow' | 'deny';
  actions: string[];
  resources: string[];
}

export interface SessionSpacesTable {
  account_id: string;
  space_id: string;
  name: string;
  description: ColumnType<string, string | undefined, string>;
  is_default: ColumnType<boolean, boolean | undefined, boolean>;
  default_ttl_seconds: ColumnType<number | null, number | null | undefined, number | null>;
  state: ColumnType<JsonObject, string | undefined, string>;
  create_time: Timestamp;
  update_time: Timestamp;
}

export interface SpaceUsersTable {
  account_id: string;
  space_id: string;
  user_id: string;
  session_count: Counter;
  state: ColumnType<JsonObject, string | undefined, string>;
  create_time: Timestamp;
}

export interface SessionsTable {
  account_id: string;
  space_id: string;
  user_id: string;
  session_id: string;
  title: ColumnType<string, string | undefined, string>;
  metadata: ColumnType<Record<string, string>, string | undefined, string>;
  state: ColumnType<JsonObject, string | undefined, string>;
  memo: ColumnType<JsonValue | null, string | null | undefined, string | null>;
  window_start_seq: Counter;
  event_count: Counter;
  revision: Counter;
  create_time: Timestamp;
  update_time: Timestamp;
  expire_time: ColumnType<Date | null, Date | string | null | undefined, Date | string | null>;
  /** The session-scoped state at create (migrations/0006); null when unknown (older and imported sessions). */
  initial_state: ColumnType<JsonObject | null, string | null | undefined, string | null>;
}

/**
 * What appends never change, indexed for the lists by create time and the search (migrations/0018):
 * kept by a trigger on sessions, never written by the service itself.
 */
export interface SessionCatalogTable {
  account_id: string;
  space_id: string;
  user_id: string;
  session_id: string;
  create_time: Date;
  title: string;
  metadata: Record<string, string>;
}

export interface EventsTable {
  account_id: string;
  space_id: string;
  user_id: string;
  session_id: string;
  seq: number;
  event_id: string;
  invocation_id: string | null;
  author: string;
  content: NullableJsonb<JsonObject>;
  actions: NullableJsonb<JsonObject>;
  metadata: NullableJsonb<JsonObject>;
  extensions: NullableJsonb<JsonObject>;
  error_code: string | null;
  error_message: string | null;
  event_time: ColumnType<Date, Date | string, Date | string>;
  create_time: Timestamp;
  payload_hash: Buffer;
}

/** The session-scoped state right after event `seq`, written by the state-at replay (migrations/0010). */
export interface StateCheckpointsTable {
  account_id: string;
  space_id: string;
  user_id: string;
  session_id: string;
  seq: number;
  state: ColumnType<JsonObject, string, string>;
  create_time: Timestamp;
}

export interface DB {
  accounts: AccountsTable;
  principals: PrincipalsTable;
  credentials: CredentialsTable;
  policies: PoliciesTable;
  session_spaces: SessionSpacesTable;
  space_users: SpaceUsersTable;
  sessions: SessionsTable;
  session_catalog: SessionCatalogTable;
  events: EventsTable;
  state_checkpoints: StateCheckpointsTable;
}

export type SessionRow = Selectable<SessionsTable>;
export type SpaceRow = Selectable<SessionSpacesTable>;
export type EventRow = Selectable<EventsTable>;
export type CredentialRow = Selectable<CredentialsTable>;
