/**
 * Leases and fenced writes for the fencing PostgreSQL extension, on node-postgres.
 * Tokens are `bigint`; durations are milliseconds; deadlines are on the
 * monotonic clock of `performance.now()`.
 */
export { Lease, withLease, SQLSTATE_LEASE_ALREADY_HELD, WAIT_CHUNK_MS, RETRY_FLOOR_MS, type LeaseOptions } from './lease';
export { Session, type SessionOptions } from './session';
export { Election, ELECTION_CHANNEL, ELECTION_TTL_MS, type ElectionOptions, type Leader } from './election';
export { defaultHolder, type Logger } from './identity';
export {
  fenced,
  staleRefusalCount,
  tokenText,
  type FencedOptions,
  type PoolLike,
  type Queryable,
  type Token,
} from './fenced';
export {
  FencingError,
  RefusedWriteError,
  StaleTokenError,
  MissingTokenError,
  LeaseLostError,
  LeaseTimeoutError,
  LeaseBusyError,
  LeaseAlreadyHeldError,
  UnsupportedServerError,
  SQLSTATE_STALE_TOKEN,
  SQLSTATE_MISSING_TOKEN,
  mapError,
  parseDetail,
  type ParsedDetail,
  type DatabaseErrorFields,
} from './errors';
export { type ConnectionOptions } from './connection';
