import type { QueryResult, QueryResultRow } from 'pg';
import { MAX_DELAY_MS } from './connection';
import { Election } from './election';
import { FencingError, LeaseLostError, RefusedWriteError, StaleTokenError, mapError } from './errors';
import { Lease } from './lease';

/** What `fenced()` needs of a connection: a node-postgres `Client` or `PoolClient`. */
export interface Queryable {
  query<R extends QueryResultRow = any>(text: string, values?: unknown[]): Promise<QueryResult<R>>;
}

/** A node-postgres `Pool`: `fenced()` checks a client out for the transaction and returns it. */
export interface PoolLike<C extends Queryable = Queryable> {
  connect(): Promise<C & { release(err?: Error | boolean): void }>;
  totalCount: number;
}

/** A token: a lease's, or one of another lock manager (a positive integer). */
export type Token = bigint | number | string;

export interface FencedOptions {
  /**
   * Called (and awaited) with the `StaleTokenError` when the server refuses
   * the write as stale (23T01), after the rollback and before the error is
   * thrown: a dead-letter hook.  An error it throws is thrown instead.
   */
  onStale?: (err: StaleTokenError) => void | Promise<void>;
}

let staleRefusals = 0;

/** How many writes `fenced()` saw refused as stale (23T01) in this process. */
export function staleRefusalCount(): number {
  return staleRefusals;
}

/** The token as the decimal text `fencing.token` takes; throws on anything but a positive integer. */
export function tokenText(token: Token): string {
  if (typeof token === 'bigint') {
    if (token <= 0n) throw new RangeError(`a fencing token must be positive, not ${token}`);
    return token.toString();
  }
  if (typeof token === 'number') {
    if (!Number.isSafeInteger(token) || token <= 0)
      throw new RangeError(`a fencing token given as a number must be a positive safe integer (use a bigint above 2^53), not ${token}`);
    return String(token);
  }
  if (typeof token === 'string' && /^\d+$/.test(token) && BigInt(token) > 0n) return BigInt(token).toString();
  throw new RangeError(`a fencing token must be a positive integer, not ${String(token)}`);
}

/**
 * The token and the bound of a lease's transaction: the server ends a session
 * idle in it, or (17+) the whole transaction, at the lease's deadline.
 */
const BOUND =
  "SELECT set_config('fencing.token', $1, true), set_config('idle_in_transaction_session_timeout', $2, true), " +
  "CASE WHEN current_setting('server_version_num')::int >= 170000 THEN set_config('transaction_timeout', $2, true) END";

function isPool(client: Queryable | PoolLike): client is PoolLike {
  return typeof (client as PoolLike).totalCount === 'number' && typeof (client as PoolLike).connect === 'function';
}

/**
 * Runs `fn` in a transaction fenced with a lease's token or a plain token:
 * `BEGIN`, `SELECT set_config('fencing.token', $1, true)` (`SET LOCAL`), the
 * caller's statements, `COMMIT`.  With a `Lease`, its deadline is checked on
 * entry and again before `COMMIT`: past it, `LeaseLostError` is thrown and
 * nothing (more) is sent but the `ROLLBACK`.  With a lease the transaction
 * is also bounded by the lease's remaining time: `SET LOCAL
 * idle_in_transaction_session_timeout` (and `transaction_timeout` on
 * PostgreSQL 17 and later) to the milliseconds left (at least 1, at most
 * INT_MAX, the largest the settings take), so that a
 * holder frozen inside it (between its UPDATE and its COMMIT) is ended by the
 * server at its deadline and holds no row lock past it; an error of a lease
 * lost meanwhile is thrown as its `LeaseLostError` (the error as its
 * `cause`).  An `Election` stands for its leadership's lease (not the
 * leader: `LeaseLostError`, nothing sent).  With `null`, the transaction
 * carries no token (a protected table then refuses with 23T02).
 *
 * Refusals are thrown as `StaleTokenError` (23T01; counted, and `onStale`
 * called) and `MissingTokenError` (23T02); the transaction is rolled back on
 * any error.  `client` is a `Client`, a `PoolClient`, or a `Pool` (a client
 * is checked out for the transaction).  Resolves with what `fn` resolves.
 */
export async function fenced<C extends Queryable, T>(
  client: PoolLike<C>,
  leaseOrToken: Lease | Election | Token | null,
  fn: (client: C) => Promise<T>,
  options?: FencedOptions,
): Promise<T>;
export async function fenced<C extends Queryable, T>(
  client: C,
  leaseOrToken: Lease | Election | Token | null,
  fn: (client: C) => Promise<T>,
  options?: FencedOptions,
): Promise<T>;
export async function fenced<T>(
  client: Queryable | PoolLike,
  leaseOrToken: Lease | Election | Token | null,
  fn: (client: Queryable) => Promise<T>,
  options: FencedOptions = {},
): Promise<T> {
  const lease =
    leaseOrToken instanceof Election ? leaseOrToken.leadership() : leaseOrToken instanceof Lease ? leaseOrToken : null;
  if (lease) lease.check(); // lost: throw before sending anything
  const token = lease ? lease.token.toString() : leaseOrToken === null ? null : tokenText(leaseOrToken as Token);

  if (isPool(client)) {
    const checkedOut = await client.connect();
    let broken: Error | undefined;
    try {
      return await fenced(checkedOut, lease ?? token, fn, options);
    } catch (err) {
      const cause = err instanceof LeaseLostError && err.cause ? err.cause : err;
      const code = (cause as { code?: string })?.code;
      // A connection that broke (or that the server ended) goes back to the pool as broken.
      if ((!(cause instanceof FencingError) && !code) || /^(08|57P|25P03)/.test(code ?? '')) broken = cause as Error;
      throw err;
    } finally {
      checkedOut.release(broken);
    }
  }

  // A client already in a transaction: BEGIN would only warn (25001), and our
  // COMMIT (or ROLLBACK) would end the caller's transaction with the token set.
  const status = (client as { getTransactionStatus?: () => string | null }).getTransactionStatus?.();
  if (status && status !== 'I')
    throw new FencingError("fenced() runs its own transaction: commit or roll back the client's open transaction first");

  // The server may end the session at the lease's deadline (the bound below)
  // while the caller's function awaits something else: node-postgres then
  // emits 'error', which would crash a process that does not listen.  The
  // transaction's next query fails anyway, and that failure is thrown.
  const emitter = lease ? (client as { on?: unknown; off?: unknown }) : null;
  const ignore = (): void => {};
  const listening = typeof emitter?.on === 'function' && typeof emitter.off === 'function';
  if (listening) (emitter as NodeJS.EventEmitter).on('error', ignore);
  let began = false;
  try {
    // Counted before BEGIN: the transaction (and transaction_timeout) starts after it.
    const bound = lease ? String(Math.min(Math.max(1, Math.floor(lease.remainingMs)), MAX_DELAY_MS)) : null;
    await client.query('BEGIN');
    began = true;
    if (bound !== null) await client.query(BOUND, [token, bound]);
    else if (token !== null) await client.query("SELECT set_config('fencing.token', $1, true)", [token]);
    const result = await fn(client);
    if (lease) lease.check(); // the deadline passed meanwhile: do not commit
    const commit = await client.query('COMMIT');
    began = false;
    if ((commit as { command?: string }).command === 'ROLLBACK')
      throw new FencingError('the transaction was rolled back at COMMIT: a statement in it failed');
    return result;
  } catch (err) {
    if (began) await client.query('ROLLBACK').catch(() => {});
    const mapped = mapError(err);
    if (lease && lease.lost && !(mapped instanceof RefusedWriteError) && !(mapped instanceof LeaseLostError)) {
      const lost = lease.signal.reason as LeaseLostError;
      throw new LeaseLostError(lease.resource, lease.token, lost.reason, { cause: err });
    }
    if (mapped instanceof StaleTokenError) {
      staleRefusals++;
      if (options.onStale) await options.onStale(mapped);
    }
    throw mapped;
  } finally {
    if (listening) (emitter as NodeJS.EventEmitter).off('error', ignore);
  }
}
