/**
 * The errors of the fencing client.
 *
 * Tokens are `bigint` everywhere: the lease manager's tokens stay below 2^53,
 * but a token from another lock manager (Redis INCR, etcd revisions, a
 * ZooKeeper zxid) or a high-water mark set by hand can be any positive
 * PostgreSQL bigint, and a JavaScript `number` silently rounds above 2^53.
 */

/** SQLSTATE of a stale token: a newer lock holder has written. */
export const SQLSTATE_STALE_TOKEN = '23T01';
/** SQLSTATE of a write to a protected table that presented no token. */
export const SQLSTATE_MISSING_TOKEN = '23T02';

/** Base class of every error this package raises itself. */
export class FencingError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** The fields of a database error this package reads (node-postgres' `DatabaseError`). */
export interface DatabaseErrorFields {
  message: string;
  code?: string;
  detail?: string;
  hint?: string;
  schema?: string;
  table?: string;
  column?: string;
  constraint?: string;
}

/**
 * Base of the refused writes, `StaleTokenError` (23T01) and
 * `MissingTokenError` (23T02): `err instanceof RefusedWriteError` catches
 * both.  What both carry (null where the server did not say).
 */
export abstract class RefusedWriteError extends FencingError {
  /** The SQLSTATE: 23T01 or 23T02. */
  readonly code: string;
  /** Schema of the table written (the `schema` field of the error). */
  readonly schema: string | null;
  /** Table written, unqualified (the `table` field); null for a stale `fencing.fence()`. */
  readonly table: string | null;
  /** The table's token column (the `column` field). */
  readonly column: string | null;
  /** `fencing_stale_token` or `fencing_missing_token` (the `constraint` field). */
  readonly constraint: string | null;
  /** The row's key as DETAIL shows it, e.g. `(id)=(1)`; null for "all rows", a resource, or not visible. */
  readonly key: string | null;
  /** The qualified relation DETAIL names, e.g. `public.orders`. */
  readonly relation: string | null;
  /** The resource of a stale `fencing.fence()`. */
  readonly resource: string | null;
  /** The token stored in the row (or the resource's mark); null when not visible. */
  readonly stored: bigint | null;
  readonly detail: string | null;
  readonly hint: string | null;

  constructor(err: DatabaseErrorFields, parsed: ParsedDetail) {
    super(err.message, { cause: err });
    this.code = err.code ?? '';
    this.schema = err.schema ?? null;
    this.table = err.table ?? null;
    this.column = err.column ?? null;
    this.constraint = err.constraint ?? null;
    this.key = parsed.key;
    this.relation = parsed.relation;
    this.resource = parsed.resource;
    this.stored = parsed.stored;
    this.detail = err.detail ?? null;
    this.hint = err.hint ?? null;
  }
}

/** 23T01: the token presented is older than the stored one (or equal, in strict mode). */
export class StaleTokenError extends RefusedWriteError {
  /** The token the write presented. */
  readonly presented: bigint | null;
  /** `monotonic` or `strict`. */
  readonly mode: string | null;

  constructor(err: DatabaseErrorFields) {
    const parsed = parseDetail(err.detail);
    super(err, parsed);
    this.presented = parsed.presented;
    this.mode = parsed.mode;
  }
}

/** 23T02: a write to a protected table presented no token. */
export class MissingTokenError extends RefusedWriteError {
  /** Always null: the write presented no token. */
  readonly presented: null = null;

  constructor(err: DatabaseErrorFields) {
    super(err, parseDetail(err.detail));
  }
}

/** The lease is gone: its deadline passed, or a renewal was refused. */
export class LeaseLostError extends FencingError {
  constructor(
    readonly resource: string,
    readonly token: bigint | null,
    /** Why: `its deadline passed`, `a renewal was refused`, ... */
    readonly reason: string,
    options?: { cause?: unknown },
  ) {
    super(`lease on "${resource}"${token === null ? '' : ` (token ${token})`} lost: ${reason}`, options);
  }
}

/** A wait for the lease passed without a grant (`waitMs` > 0). */
export class LeaseTimeoutError extends FencingError {
  constructor(
    readonly resource: string,
    readonly waitMs: number,
  ) {
    super(`lease on "${resource}" not granted within ${waitMs} ms`);
  }
}

/** A try (no `waitMs`, or 0) found the lease held by another holder: nothing waited. */
export class LeaseBusyError extends FencingError {
  constructor(readonly resource: string) {
    super(`lease on "${resource}" is held by another holder`);
  }
}

/** The server's fencing extension is absent or older than this client needs (0.4.0). */
export class UnsupportedServerError extends FencingError {
  constructor(readonly version: string | null) {
    super(
      version === null
        ? 'the fencing extension is not installed in this database: CREATE EXTENSION fencing (0.4.0 or later)'
        : `the fencing extension is at version ${version}, this client needs 0.4.0 or later: ALTER EXTENSION fencing UPDATE`,
    );
  }
}

/** The holder asked again for a lease it already holds (live, with `token`). */
export class LeaseAlreadyHeldError extends FencingError {
  constructor(
    readonly resource: string,
    readonly holder: string,
    readonly token: bigint | null,
  ) {
    super(
      `holder "${holder}" already holds the lease on "${resource}"` +
        (token === null ? '' : ` (token ${token})`),
    );
  }
}

/** What the DETAIL of 23T01 / 23T02 says (see src/errors.cpp of the extension). */
export interface ParsedDetail {
  relation: string | null;
  key: string | null;
  resource: string | null;
  presented: bigint | null;
  stored: bigint | null;
  mode: string | null;
}

const STALE_DETAIL =
  /^(?:Relation (.+?), (?:key (.*)|all rows)|Resource "(.*)"): presented token (-?\d+), stored token (-?\d+|\(not visible\)) \((\w+) mode\)\.$/s;
const MISSING_DETAIL =
  /^Relation (.+?), (?:key (.*)|all rows): no token presented, stored token (-?\d+|\(not visible\))\./s;

function tokenOrNull(text: string | undefined): bigint | null {
  return text !== undefined && /^-?\d+$/.test(text) ? BigInt(text) : null;
}

/**
 * Parses the DETAIL of a refused write:
 * `Relation public.t, key (id)=(1): presented token 5, stored token 7 (monotonic mode).`,
 * `Resource "order:1": presented token 5, stored token 7 (monotonic mode).` or
 * `Relation public.t, key (id)=(1): no token presented, stored token 7.`
 */
export function parseDetail(detail: string | undefined | null): ParsedDetail {
  const none: ParsedDetail = {
    relation: null,
    key: null,
    resource: null,
    presented: null,
    stored: null,
    mode: null,
  };
  if (!detail) return none;
  let m = STALE_DETAIL.exec(detail);
  if (m) {
    return {
      relation: m[1] ?? null,
      key: m[2] === undefined || m[2] === '(not visible)' ? null : m[2],
      resource: m[3] ?? null,
      presented: tokenOrNull(m[4]),
      stored: tokenOrNull(m[5]),
      mode: m[6] ?? null,
    };
  }
  m = MISSING_DETAIL.exec(detail);
  if (m) {
    return {
      ...none,
      relation: m[1] ?? null,
      key: m[2] === undefined || m[2] === '(not visible)' ? null : m[2],
      stored: tokenOrNull(m[3]),
    };
  }
  return none;
}

/**
 * Maps a node-postgres error to `StaleTokenError` (23T01) or
 * `MissingTokenError` (23T02); returns any other error unchanged.
 */
export function mapError(err: unknown): unknown {
  if (err instanceof RefusedWriteError) return err;
  if (err && typeof err === 'object' && 'code' in err) {
    const e = err as DatabaseErrorFields;
    if (e.code === SQLSTATE_STALE_TOKEN) return new StaleTokenError(e);
    if (e.code === SQLSTATE_MISSING_TOKEN) return new MissingTokenError(e);
  }
  return err;
}
