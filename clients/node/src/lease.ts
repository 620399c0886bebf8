import { KeepaliveConnection, interval, now, timerDelay, type ConnectionOptions, type Notice } from './connection';
import { LeaseAlreadyHeldError, LeaseBusyError, LeaseLostError, LeaseTimeoutError } from './errors';
import { holderOption, loggerOption, type Logger } from './identity';

/**
 * SQLSTATE of the NOTICE `fencing.acquire()` raises when a holder asks again
 * for a lease it holds (the call answers NULL at once).
 */
export const SQLSTATE_LEASE_ALREADY_HELD = '01T01';

/** How long a try-acquire, a release or a renewal without a deadline may take before the connection is dropped. */
const CALL_TIMEOUT_MS = 30_000;

/** The longest server-side wait of one call: a longer wait (or `Infinity`) is a series of them. */
export const WAIT_CHUNK_MS = 3_600_000;

export interface LeaseOptions {
  /**
   * Who holds the lease (the `holder` of `fencing.leases`).  Left out: a new
   * `<host>:<pid>:<random>` (`lease.holder` tells it).  Choose one only when a
   * restarted process must resume its own lease.
   */
  holder?: string | null;
  /** Time to live in milliseconds; the lease is renewed every third of it. */
  ttlMs: number;
  /**
   * How long to wait for the lease in milliseconds, served first come first
   * served; `Infinity` waits until granted (ended by `signal`); `null`,
   * `undefined` or 0 tries once (the lease is busy: `LeaseBusyError`).
   */
  waitMs?: number | null;
  /** Ends a wait: the server-side call is cancelled, nothing stays queued, and the signal's reason is thrown. */
  signal?: AbortSignal;
  /** Where the loss of the lease is logged (`warn`); `console` when left out. */
  logger?: Logger;
}

/** @internal The options checked, the holder chosen. */
export interface ResolvedOptions {
  holder: string;
  ttlMs: number;
  waitMs: number | null;
  signal: AbortSignal | undefined;
  logger: Logger;
}

/** @internal The SQL functions a lease is granted and released with (an election's: campaign and resign). */
export interface LeaseCalls {
  acquire: string;
  release: string;
}

/** @internal */
export const LEASE_CALLS: LeaseCalls = { acquire: 'fencing.acquire', release: 'fencing.release' };

/** @internal What keeps a lease alive and releases it: its own connection, or a session's. */
export interface LeaseOwner {
  release(lease: Lease): Promise<boolean>;
  /** The lease is lost: stop renewing it. */
  lost(lease: Lease): void;
}

/** @internal Throws (TypeError, RangeError) on a bad resource or option, before anything is sent. */
export function checkResource(resource: unknown, what = 'resource'): string {
  if (typeof resource !== 'string' || resource === '') throw new TypeError(`${what} must be a non-empty string`);
  return resource;
}

/** @internal A positive, finite number of milliseconds (a TTL). */
export function checkTtl(ttlMs: unknown): number {
  if (typeof ttlMs !== 'number') throw new TypeError(`ttlMs must be a number of milliseconds, not ${typeof ttlMs}`);
  if (!(ttlMs > 0 && Number.isFinite(ttlMs))) throw new RangeError(`ttlMs must be a positive finite number of milliseconds, not ${ttlMs}`);
  return ttlMs;
}

/** @internal A wait: null/undefined (a try), or a number of milliseconds >= 0, `Infinity` included. */
export function checkWait(waitMs: unknown): number | null {
  if (waitMs === null || waitMs === undefined) return null;
  if (typeof waitMs !== 'number') throw new TypeError(`waitMs must be a number of milliseconds (or Infinity), not ${typeof waitMs}`);
  if (Number.isNaN(waitMs) || waitMs < 0) throw new RangeError(`waitMs must be >= 0 milliseconds or Infinity, not ${waitMs}`);
  return waitMs;
}

/** @internal An AbortSignal, or absent. */
export function checkSignal(signal: unknown): AbortSignal | undefined {
  if (signal === undefined || signal === null) return undefined;
  if (!(signal instanceof AbortSignal)) throw new TypeError('signal must be an AbortSignal');
  return signal;
}

/** @internal Checks every option of a lease; throws before anything is sent. */
export function resolveOptions(resource: unknown, opts: LeaseOptions): ResolvedOptions {
  checkResource(resource);
  if (opts === null || typeof opts !== 'object') throw new TypeError('the options must be an object with ttlMs');
  return {
    holder: holderOption(opts.holder),
    ttlMs: checkTtl(opts.ttlMs),
    waitMs: checkWait(opts.waitMs),
    signal: checkSignal(opts.signal),
    logger: loggerOption(opts.logger),
  };
}

function tokenFromNotice(notice: Notice): bigint | null {
  const m = /token (\d+)/.exec(`${notice.message} ${notice.detail ?? ''}`);
  return m ? BigInt(m[1]!) : null;
}

/**
 * @internal `fencing.acquire()` (or `calls.acquire`) on `conn`: a try, or a
 * series of server-side waits of at most an hour each until granted or
 * `waitMs` passed.  Resolves with the token and the monotonic time at which
 * the granting call started; throws `LeaseAlreadyHeldError`,
 * `LeaseBusyError` (a try) or `LeaseTimeoutError` (a wait that passed).  An
 * aborted `signal` cancels the call in flight and throws its reason; a grant
 * that raced the abort is released first.
 */
export async function acquireOn(
  conn: KeepaliveConnection,
  resource: string,
  opts: ResolvedOptions,
  calls: LeaseCalls = LEASE_CALLS,
): Promise<{ token: bigint; start: number }> {
  const { signal } = opts;
  signal?.throwIfAborted();
  const waiting = opts.waitMs !== null && opts.waitMs > 0;
  const until = waiting ? now() + opts.waitMs! : 0;
  for (;;) {
    const wait = waiting ? Math.min(WAIT_CHUNK_MS, Math.max(1, until - now())) : 0;
    const start = now();
    let answer;
    try {
      answer = await conn.query(
        `SELECT ${calls.acquire}($1, $2, ${interval(3)}${waiting ? `, ${interval(4)}` : ''})::text AS token`,
        waiting ? [resource, opts.holder, opts.ttlMs, wait] : [resource, opts.holder, opts.ttlMs],
        wait + CALL_TIMEOUT_MS,
        signal,
      );
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw err;
    }
    const token = answer.result.rows[0]?.token as string | null;
    if (token !== null && token !== undefined) {
      if (signal?.aborted) {
        // Granted as the abort came: give it back, the caller asked for nothing.
        await releaseOn(conn, { resource, holder: opts.holder, token: BigInt(token) }, CALL_TIMEOUT_MS / 6, calls).catch(() => false);
        throw signal.reason;
      }
      return { token: BigInt(token), start };
    }
    const held = answer.notices.find((n) => n.code === SQLSTATE_LEASE_ALREADY_HELD);
    if (held) throw new LeaseAlreadyHeldError(resource, opts.holder, tokenFromNotice(held));
    if (!waiting) throw new LeaseBusyError(resource);
    if (now() >= until) throw new LeaseTimeoutError(resource, opts.waitMs!);
  }
}

/** @internal `fencing.renew()` on `conn`: true if renewed, false if the lease was lost. */
export async function renewOn(conn: KeepaliveConnection, lease: Lease, timeoutMs: number): Promise<boolean> {
  return renewToken(conn, lease.resource, lease.holder, lease.token, lease.ttlMs, timeoutMs);
}

async function renewToken(
  conn: KeepaliveConnection,
  resource: string,
  holder: string,
  token: bigint,
  ttlMs: number,
  timeoutMs: number,
): Promise<boolean> {
  const { result } = await conn.query(
    `SELECT fencing.renew($1, $2, $3::bigint, ${interval(4)}) AS renewed`,
    [resource, holder, token.toString(), ttlMs],
    timeoutMs,
  );
  return result.rows[0]?.renewed === true;
}

/**
 * @internal A grant that came a third of the TTL or more after the acquiring
 * call started (a long wait): the deadline, counted from that start, would be
 * short or already past.  Renews it at once; resolves with the start of that
 * renewal, which the lease's deadline then counts from.  A refused renewal
 * means the lease was lost before acquire() returned: LeaseLostError.
 */
export async function confirmGrant(
  conn: KeepaliveConnection,
  resource: string,
  opts: ResolvedOptions,
  granted: { token: bigint; start: number },
): Promise<number> {
  if (now() - granted.start < opts.ttlMs / 3) return granted.start;
  const start = now();
  const renewed = await renewToken(conn, resource, opts.holder, granted.token, opts.ttlMs, CALL_TIMEOUT_MS);
  if (!renewed) throw new LeaseLostError(resource, granted.token, 'it expired before acquire() returned');
  return start;
}

/** @internal `fencing.release()` (or `calls.release`) on `conn`. */
export async function releaseOn(
  conn: KeepaliveConnection,
  lease: Pick<Lease, 'resource' | 'holder' | 'token'>,
  timeoutMs: number,
  calls: LeaseCalls = LEASE_CALLS,
): Promise<boolean> {
  const { result } = await conn.query(
    `SELECT ${calls.release}($1, $2, $3::bigint) AS released`,
    [lease.resource, lease.holder, lease.token.toString()],
    timeoutMs,
  );
  return result.rows[0]?.released === true;
}

/** @internal Two tries (the second on a new connection): a network error is thrown after both failed. */
export async function releaseTwice(conn: KeepaliveConnection, lease: Lease, calls: LeaseCalls): Promise<boolean> {
  try {
    return await releaseOn(conn, lease, CALL_TIMEOUT_MS / 6, calls);
  } catch {
    return await releaseOn(conn, lease, CALL_TIMEOUT_MS / 6, calls);
  }
}

/** @internal Grants a lease on a connection of its own, kept alive by it until released. */
export async function acquireOwn(
  connection: ConnectionOptions,
  resource: string,
  opts: ResolvedOptions,
  calls: LeaseCalls,
): Promise<Lease> {
  const conn = new KeepaliveConnection(connection, `fencing keepalive ${opts.holder}`);
  let granted: { token: bigint; start: number } | null = null;
  try {
    granted = await acquireOn(conn, resource, opts, calls);
    const start = await confirmGrant(conn, resource, opts, granted);
    const lease = new Lease(resource, opts.holder, opts.ttlMs, granted.token, start, opts.logger);
    const keepalive = new OwnKeepalive(conn, lease, calls);
    lease._setOwner(keepalive);
    keepalive.schedule();
    return lease;
  } catch (err) {
    if (granted) {
      const token = granted.token;
      await releaseOn(conn, { resource, holder: opts.holder, token }, CALL_TIMEOUT_MS / 6, calls).catch(() => false);
    }
    await conn.close();
    throw err;
  }
}

/**
 * A lease on one resource, granted by `fencing.acquire()`.
 *
 * It keeps itself alive on its own connection (application_name
 * `fencing keepalive <holder>`) every third of its TTL, and knows its
 * **deadline**: the start of the last acknowledged call (the grant or a
 * renewal) plus the TTL, on the monotonic clock (`performance.now()`). Past
 * the deadline the lease is lost, whatever the renewals say: `signal` aborts
 * with a `LeaseLostError`, `check()` throws it, and `fenced()` refuses to
 * write.  A refused renewal loses it at once; failed renewals (a broken
 * connection, a restarting server) are retried until the deadline.
 *
 * Release it in `finally` (Node 20 has no `await using`):
 *
 * ```ts
 * const lease = await Lease.acquire(undefined, 'order:101', { ttlMs: 10_000, waitMs: Infinity });
 * try {
 *   await fenced(client, lease, (c) => c.query('UPDATE ...'));
 * } finally {
 *   await lease.release();
 * }
 * ```
 */
export class Lease implements AsyncDisposable {
  readonly resource: string;
  readonly holder: string;
  readonly ttlMs: number;
  /** The fencing token of this grant. */
  readonly token: bigint;
  #deadline: number;
  #lastAcknowledged: number;
  #controller = new AbortController();
  #released = false;
  #releasing: Promise<boolean> | null = null;
  #deadlineTimer: NodeJS.Timeout | null = null;
  #owner: LeaseOwner | null = null;
  readonly #logger: Logger;

  /** Not for users: use `Lease.acquire()` or `Session.lease()`. */
  constructor(resource: string, holder: string, ttlMs: number, token: bigint, start: number, logger: Logger = console) {
    this.#logger = logger;
    this.resource = resource;
    this.holder = holder;
    this.ttlMs = ttlMs;
    this.token = token;
    this.#lastAcknowledged = start;
    this.#deadline = start + ttlMs;
    this.#armDeadline();
  }

  /**
   * Acquires a lease on `resource` and keeps it alive on a connection of its
   * own until `release()`.  Throws `LeaseBusyError` if a try finds it held,
   * `LeaseTimeoutError` if a wait passed, `LeaseAlreadyHeldError` if `holder`
   * holds it already, the signal's reason if `signal` ended the wait,
   * `UnsupportedServerError` below fencing 0.4.0; `TypeError` / `RangeError`
   * for a bad argument (nothing sent).
   */
  static async acquire(connection: ConnectionOptions, resource: string, opts: LeaseOptions): Promise<Lease> {
    return acquireOwn(connection, resource, resolveOptions(resource, opts), LEASE_CALLS);
  }

  /** @internal */
  _setOwner(owner: LeaseOwner): void {
    this.#owner = owner;
  }

  /** The monotonic time (`performance.now()`, milliseconds) at which the lease is lost unless renewed. */
  get deadline(): number {
    return this.#deadline;
  }

  /** Milliseconds left until the deadline (negative once passed). */
  get remainingMs(): number {
    return this.#deadline - now();
  }

  /** The start of the last acknowledged call (grant or renewal), monotonic milliseconds. */
  get lastAcknowledged(): number {
    return this.#lastAcknowledged;
  }

  /** True once the lease is lost (deadline passed, or a renewal refused). Checks the clock. */
  get lost(): boolean {
    if (!this.#controller.signal.aborted && now() >= this.#deadline) this._lose('its deadline passed');
    return this.#controller.signal.aborted;
  }

  /** Aborted, with a `LeaseLostError` as its reason, when the lease is lost. Not aborted by `release()`. */
  get signal(): AbortSignal {
    void this.lost;
    return this.#controller.signal;
  }

  /** True once `release()` was called. */
  get released(): boolean {
    return this.#released;
  }

  /** Throws `LeaseLostError` if the lease is lost (or released). */
  check(): void {
    if (this.lost) throw this.#controller.signal.reason as LeaseLostError;
    if (this.#released) throw new LeaseLostError(this.resource, this.token, 'it was released');
  }

  /**
   * @internal A call that started at `start` (monotonic) was acknowledged:
   * the deadline moves to start + TTL.  Returns false if the lease is lost.
   */
  _acknowledge(start: number): boolean {
    if (this.lost || this.#released) return false;
    if (start > this.#lastAcknowledged) {
      this.#lastAcknowledged = start;
      this.#deadline = start + this.ttlMs;
    }
    if (this.lost) return false;
    this.#armDeadline();
    return true;
  }

  /** @internal The lease is lost: abort the signal. */
  _lose(reason: string): void {
    if (this.#controller.signal.aborted) return;
    this.#clearDeadline();
    this.#owner?.lost(this);
    this.#logger.warn(`fencing: lease on ${this.resource} lost (holder ${this.holder}, token ${this.token}): ${reason}`);
    this.#controller.abort(new LeaseLostError(this.resource, this.token, reason));
  }

  #armDeadline(): void {
    this.#clearDeadline();
    this.#deadlineTimer = setTimeout(
      () => {
        // A timer may fire a little before the clock says the deadline passed: arm it again.
        if (!this.lost && !this.#released) this.#armDeadline();
      },
      timerDelay(Math.max(0, this.#deadline - now()) + 1),
    );
    this.#deadlineTimer.unref();
  }

  #clearDeadline(): void {
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = null;
  }

  /**
   * Stops the keepalive and releases the lease (`fencing.release()`).
   * Resolves to true if the server had it and released it, false if it was
   * already lost (never throws for a lost lease).  Rejects with the network
   * error if the server could not be reached, twice (the lease then ends at
   * its TTL).  Calling it again returns the first answer.
   */
  release(): Promise<boolean> {
    if (this.#releasing) return this.#releasing;
    this.#released = true;
    this.#clearDeadline();
    const owner = this.#owner;
    this.#releasing = owner ? owner.release(this) : Promise.resolve(false);
    return this.#releasing;
  }

  /** `await using lease = ...` (TypeScript 5.2+ / runtimes with explicit resource management) releases it. */
  async [Symbol.asyncDispose](): Promise<void> {
    await this.release();
  }
}

/** The keepalive of a lease of its own: its connection, renewing every third of the TTL. */
class OwnKeepalive implements LeaseOwner {
  #timer: NodeJS.Timeout | null = null;
  #inflight: Promise<void> | null = null;

  constructor(
    private readonly conn: KeepaliveConnection,
    private readonly lease: Lease,
    private readonly calls: LeaseCalls,
  ) {}

  /** Schedules the next renewal a third of the TTL after the last acknowledged call. */
  schedule(delayMs?: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    const lease = this.lease;
    const delay = delayMs ?? lease.lastAcknowledged + lease.ttlMs / 3 - now();
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#inflight = this.#tick();
    }, timerDelay(delay));
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    const lease = this.lease;
    if (lease.released || lease.lost) return;
    const start = now();
    try {
      // No answer before the deadline is as good as a refusal; a hung
      // connection is dropped after a third of the TTL and retried.
      const renewed = await renewOn(this.conn, lease, Math.max(1, Math.min(lease.ttlMs / 3, lease.deadline - start)));
      if (lease.released) return;
      if (!renewed) {
        lease._lose('a renewal was refused');
        return;
      }
      if (lease._acknowledge(start)) this.schedule();
    } catch {
      if (lease.released || lease.lost) return;
      // Retry (reconnecting) until the deadline.
      this.schedule(retryDelay(lease.ttlMs, lease.deadline - now()));
    }
  }

  lost(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  async release(lease: Lease): Promise<boolean> {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#inflight?.catch(() => {});
    try {
      return await releaseTwice(this.conn, lease, this.calls);
    } finally {
      await this.conn.close();
    }
  }
}

/** The floor of the retry delay after a failed renewal, in every client. */
export const RETRY_FLOOR_MS = 50;

/** @internal The delay before retrying a failed renewal: a tenth of the TTL, at least 50 ms, at most 1 s and the time left. */
export function retryDelay(ttlMs: number, leftMs: number): number {
  return Math.min(Math.max(ttlMs / 10, RETRY_FLOOR_MS), 1000, Math.max(0, leftMs));
}

/**
 * Acquires a lease (`waitMs` left out: waits until granted), runs `fn` with
 * it and releases it when `fn` ends, also when it throws (Node 20's form of
 * `await using`).  `fn` sees the loss as `lease.signal` (pass it on to what
 * it awaits); if the lease is lost while `fn` runs, the call ends with the
 * `LeaseLostError`, whatever `fn` resolved with.
 */
export async function withLease<T>(
  connection: ConnectionOptions,
  resource: string,
  opts: LeaseOptions,
  fn: (lease: Lease) => Promise<T>,
): Promise<T> {
  if (typeof fn !== 'function') throw new TypeError('withLease needs a function to run with the lease');
  const resolved = resolveOptions(resource, opts);
  if (opts.waitMs === undefined) resolved.waitMs = Infinity;
  const lease = await acquireOwn(connection, resource, resolved, LEASE_CALLS);
  let result: T;
  try {
    result = await fn(lease);
  } catch (err) {
    await lease.release().catch(() => false);
    if (lease.lost) throw lease.signal.reason;
    throw err;
  }
  if (lease.lost) {
    await lease.release().catch(() => false);
    throw lease.signal.reason;
  }
  await lease.release();
  return result;
}
