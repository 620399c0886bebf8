import type { QueryResult, QueryResultRow } from 'pg';
import { FencingError, StaleTokenError, mapError } from './errors';
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

function isPool(client: Queryable | PoolLike): client is PoolLike {
  return typeof (client as PoolLike).totalCount === 'number' && typeof (client as PoolLike).connect === 'function';
}

/**
 * Runs `fn` in a transaction fenced with a lease's token or a plain token:
 * `BEGIN`, `SELECT set_config('fencing.token', $1, true)` (`SET LOCAL`), the
 * caller's statements, `COMMIT`.  With a `Lease`, its deadline is checked on
 * entry and again before `COMMIT`: past it, `LeaseLostError` is thrown and
 * nothing (more) is sent but the `ROLLBACK`.  With `null`, the transaction
 * carries no token (a protected table then refuses with 23T02).
 *
 * Refusals are thrown as `StaleTokenError` (23T01; counted, and `onStale`
 * called) and `MissingTokenError` (23T02); the transaction is rolled back on
 * any error.  `client` is a `Client`, a `PoolClient`, or a `Pool` (a client
 * is checked out for the transaction).  Resolves with what `fn` resolves.
 */
export async function fenced<C extends Queryable, T>(
  client: PoolLike<C>,
  leaseOrToken: Lease | Token | null,
  fn: (client: C) => Promise<T>,
  options?: FencedOptions,
): Promise<T>;
export async function fenced<C extends Queryable, T>(
  client: C,
  leaseOrToken: Lease | Token | null,
  fn: (client: C) => Promise<T>,
  options?: FencedOptions,
): Promise<T>;
export async function fenced<T>(
  client: Queryable | PoolLike,
  leaseOrToken: Lease | Token | null,
  fn: (client: Queryable) => Promise<T>,
  options: FencedOptions = {},
): Promise<T> {
  const lease = leaseOrToken instanceof Lease ? leaseOrToken : null;
  if (lease) lease.check(); // lost: throw before sending anything
  const token = lease ? lease.token.toString() : leaseOrToken === null ? null : tokenText(leaseOrToken as Token);

  if (isPool(client)) {
    const checkedOut = await client.connect();
    let broken: Error | undefined;
    try {
      return await fenced(checkedOut, lease ?? token, fn, options);
    } catch (err) {
      if (!(err instanceof FencingError) && !(err as { code?: string })?.code) broken = err as Error;
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

  let began = false;
  try {
    await client.query('BEGIN');
    began = true;
    if (token !== null) await client.query("SELECT set_config('fencing.token', $1, true)", [token]);
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
    if (mapped instanceof StaleTokenError) {
      staleRefusals++;
      if (options.onStale) await options.onStale(mapped);
    }
    throw mapped;
  }
}
