import { KeepaliveConnection, interval, now, type ConnectionOptions, type Notice } from './connection';
import { LeaseAlreadyHeldError, LeaseLostError, LeaseTimeoutError } from './errors';

/**
 * SQLSTATE of the NOTICE `fencing.acquire()` raises when a holder asks again
 * for a lease it holds (the call answers NULL at once).
 */
export const SQLSTATE_LEASE_ALREADY_HELD = '01T01';

/** How long a try-acquire, a release or a renewal without a deadline may take before the connection is dropped. */
const CALL_TIMEOUT_MS = 30_000;

export interface LeaseOptions {
  /** Who holds the lease: a name unique to this worker (the `holder` of `fencing.leases`). */
  holder: string;
  /** Time to live in milliseconds; the lease is renewed every third of it. */
  ttlMs: number;
  /**
   * How long to wait for the lease in milliseconds, served first come first
   * served; `null`, `undefined` or 0 tries once (the lease is busy: `LeaseTimeoutError`).
   */
  waitMs?: number | null;
}

/** @internal What keeps a lease alive and releases it: its own connection, or a session's. */
export interface LeaseOwner {
  release(lease: Lease): Promise<boolean>;
  /** The lease is lost: stop renewing it. */
  lost(lease: Lease): void;
}

function validate(resource: string, opts: LeaseOptions): void {
  if (typeof resource !== 'string' || resource === '') throw new TypeError('resource must be a non-empty string');
  if (typeof opts?.holder !== 'string' || opts.holder === '') throw new TypeError('holder must be a non-empty string');
  if (!(typeof opts.ttlMs === 'number' && opts.ttlMs > 0 && Number.isFinite(opts.ttlMs)))
    throw new RangeError('ttlMs must be a positive number of milliseconds');
  if (opts.waitMs != null && !(typeof opts.waitMs === 'number' && opts.waitMs >= 0 && Number.isFinite(opts.waitMs)))
    throw new RangeError('waitMs must be null or a number of milliseconds >= 0');
}

function tokenFromNotice(notice: Notice): bigint | null {
  const m = /token (\d+)/.exec(`${notice.message} ${notice.detail ?? ''}`);
  return m ? BigInt(m[1]!) : null;
}

/**
 * @internal `fencing.acquire()` on `conn`.  Resolves with the token and the monotonic
 * time at which the call started; throws `LeaseAlreadyHeldError` or
 * `LeaseTimeoutError` when it is not granted.
 */
export async function acquireOn(
  conn: KeepaliveConnection,
  resource: string,
  opts: LeaseOptions,
): Promise<{ token: bigint; start: number }> {
  const wait = opts.waitMs ? opts.waitMs : null;
  const start = now();
  const { result, notices } = wait
    ? await conn.query(
        `SELECT fencing.acquire($1, $2, ${interval(3)}, ${interval(4)})::text AS token`,
        [resource, opts.holder, opts.ttlMs, wait],
        wait + CALL_TIMEOUT_MS,
      )
    : await conn.query(
        `SELECT fencing.acquire($1, $2, ${interval(3)})::text AS token`,
        [resource, opts.holder, opts.ttlMs],
        CALL_TIMEOUT_MS,
      );
  const token = result.rows[0]?.token as string | null;
  if (token !== null && token !== undefined) return { token: BigInt(token), start };
  const held = notices.find((n) => n.code === SQLSTATE_LEASE_ALREADY_HELD);
  if (held) throw new LeaseAlreadyHeldError(resource, opts.holder, tokenFromNotice(held));
  // A server without that NOTICE: is the live lease this holder's own?
  const own = await conn.query(
    'SELECT token::text AS token FROM fencing.leases WHERE resource = $1 AND holder = $2 AND live',
    [resource, opts.holder],
    CALL_TIMEOUT_MS,
  );
  if (own.result.rows.length > 0)
    throw new LeaseAlreadyHeldError(resource, opts.holder, BigInt(own.result.rows[0].token as string));
  throw new LeaseTimeoutError(resource, wait);
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
  opts: LeaseOptions,
  granted: { token: bigint; start: number },
): Promise<number> {
  if (now() - granted.start < opts.ttlMs / 3) return granted.start;
  const start = now();
  const renewed = await renewToken(conn, resource, opts.holder, granted.token, opts.ttlMs, CALL_TIMEOUT_MS);
  if (!renewed) throw new LeaseLostError(resource, granted.token, 'it expired before acquire() returned');
  return start;
}

/** @internal `fencing.release()` on `conn`. */
export async function releaseOn(
  conn: KeepaliveConnection,
  lease: Pick<Lease, 'resource' | 'holder' | 'token'>,
  timeoutMs: number,
): Promise<boolean> {
  const { result } = await conn.query(
    'SELECT fencing.release($1, $2, $3::bigint) AS released',
    [lease.resource, lease.holder, lease.token.toString()],
    timeoutMs,
  );
  return result.rows[0]?.released === true;
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
 * const lease = await Lease.acquire(undefined, 'order:101', { holder: 'worker-a', ttlMs: 10_000 });
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

  /** Not for users: use `Lease.acquire()` or `Session.lease()`. */
  constructor(resource: string, holder: string, ttlMs: number, token: bigint, start: number) {
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
   * own until `release()`.  Throws `LeaseTimeoutError` if it is busy (or the
   * wait passed), `LeaseAlreadyHeldError` if `holder` holds it already.
   */
  static async acquire(connection: ConnectionOptions, resource: string, opts: LeaseOptions): Promise<Lease> {
    validate(resource, opts);
    const conn = new KeepaliveConnection(connection, `fencing keepalive ${opts.holder}`);
    let granted: { token: bigint; start: number } | null = null;
    try {
      granted = await acquireOn(conn, resource, opts);
      const start = await confirmGrant(conn, resource, opts, granted);
      const lease = new Lease(resource, opts.holder, opts.ttlMs, granted.token, start);
      const keepalive = new OwnKeepalive(conn, lease);
      lease._setOwner(keepalive);
      keepalive.schedule();
      return lease;
    } catch (err) {
      if (granted) {
        const token = granted.token;
        await releaseOn(conn, { resource, holder: opts.holder, token }, CALL_TIMEOUT_MS / 6).catch(() => false);
      }
      await conn.close();
      throw err;
    }
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
    this.#controller.abort(new LeaseLostError(this.resource, this.token, reason));
    this.#owner?.lost(this);
  }

  #armDeadline(): void {
    this.#clearDeadline();
    this.#deadlineTimer = setTimeout(
      () => {
        // A timer may fire a little before the clock says the deadline passed: arm it again.
        if (!this.lost && !this.#released) this.#armDeadline();
      },
      Math.max(0, this.#deadline - now()) + 1,
    );
    this.#deadlineTimer.unref();
  }

  #clearDeadline(): void {
    if (this.#deadlineTimer) clearTimeout(this.#deadlineTimer);
    this.#deadlineTimer = null;
  }

  /**
   * Stops the keepalive and releases the lease (`fencing.release()`).
   * Resolves to true if the server released it, false if it was no longer
   * held or the server could not be reached (the lease then ends at its TTL).
   * Never throws; calling it again returns the first answer.
   */
  release(): Promise<boolean> {
    if (this.#releasing) return this.#releasing;
    this.#released = true;
    this.#clearDeadline();
    const owner = this.#owner;
    this.#releasing = owner ? owner.release(this).catch(() => false) : Promise.resolve(false);
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
  ) {}

  /** Schedules the next renewal a third of the TTL after the last acknowledged call. */
  schedule(delayMs?: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    const lease = this.lease;
    const delay = delayMs ?? lease.lastAcknowledged + lease.ttlMs / 3 - now();
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#inflight = this.#tick();
    }, Math.max(0, delay));
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
      this.schedule(Math.min(Math.max(lease.ttlMs / 10, 50), 1000, Math.max(0, lease.deadline - now())));
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
      return await releaseOn(this.conn, lease, CALL_TIMEOUT_MS / 6);
    } catch {
      try {
        return await releaseOn(this.conn, lease, CALL_TIMEOUT_MS / 6); // once more, on a new connection
      } catch {
        return false;
      }
    } finally {
      await this.conn.close();
    }
  }
}

/**
 * Acquires a lease, runs `fn` with it and releases it, also when `fn` throws
 * (Node 20's form of `await using`).
 */
export async function withLease<T>(
  connection: ConnectionOptions,
  resource: string,
  opts: LeaseOptions,
  fn: (lease: Lease) => Promise<T>,
): Promise<T> {
  const lease = await Lease.acquire(connection, resource, opts);
  try {
    return await fn(lease);
  } finally {
    await lease.release();
  }
}
