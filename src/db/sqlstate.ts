// The PostgreSQL names this service matches on, each written once: SQLSTATEs
// (https://www.postgresql.org/docs/current/errcodes-appendix.html) and the constraint names
// PostgreSQL generated for the migrations' unnamed constraints.
export const SQLSTATE = {
  uniqueViolation: '23505',
  readOnlySqlTransaction: '25006',
  inFailedSqlTransaction: '25P02',
  idleInTransactionSessionTimeout: '25P03',
  insufficientResources: '53000',
  diskFull: '53100',
  outOfMemory: '53200',
  tooManyConnections: '53300',
  lockNotAvailable: '55P03',
  queryCanceled: '57014',
  adminShutdown: '57P01',
  crashShutdown: '57P02',
  cannotConnectNow: '57P03',
  deadlockDetected: '40P01',
  serializationFailure: '40001',
} as const;

export const CONSTRAINT = {
  /**
   * UNIQUE (account_id, space_id, user_id, session_id, event_id) of events (migrations/0001_core.sql),
   * named by PostgreSQL; on Citus a shard's copy carries the shard id in its name, so the columns
   * identify it too (db/errors.ts violatesUniqueKey).
   */
  eventIdUnique: {
    constraint: 'events_account_id_space_id_user_id_session_id_event_id_key',
    columns: ['account_id', 'space_id', 'user_id', 'session_id', 'event_id'],
  },
} as const;
