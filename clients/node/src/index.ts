/**
 * Leases and fenced writes for the fencing PostgreSQL extension, on node-postgres.
 * Tokens are `bigint`; durations are milliseconds; deadlines are on the
 * monotonic clock of `performance.now()`.
 */
export { Lease, withLease, SQLSTATE_LEASE_ALREADY_HELD, type LeaseOptions } from './lease';
export { Session, type SessionOptions } from './session';
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
  StaleTokenError,
  MissingTokenError,
  LeaseLostError,
  LeaseTimeoutError,
  LeaseAlreadyHeldError,
  SQLSTATE_STALE_TOKEN,
  SQLSTATE_MISSING_TOKEN,
  mapError,
  parseDetail,
  type ParsedDetail,
  type DatabaseErrorFields,
} from './errors';
export { type ConnectionOptions } from './connection';
