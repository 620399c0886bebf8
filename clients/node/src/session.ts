import { KeepaliveConnection, interval, now, timerDelay, type ConnectionOptions } from './connection';
import { holderOption, loggerOption, type Logger } from './identity';
import {
  LEASE_CALLS,
  Lease,
  acquireOn,
  confirmGrant,
  releaseOn,
  releaseTwice,
  resolveOptions,
  retryDelay,
  type LeaseOptions,
  type LeaseOwner,
} from './lease';

const CALL_TIMEOUT_MS = 30_000;

export interface SessionOptions {
  /** Who holds the session's leases; left out: a new `<host>:<pid>:<random>` (`session.holder`). */
  holder?: string | null;
  /** Where the loss of a lease is logged (`warn`); `console` when left out. */
  logger?: Logger;
}

/**
 * Many leases of one holder kept alive by one connection
 * (application_name `fencing keepalive <holder>`): every third of the
 * shortest TTL it holds, one `fencing.renew_all()` per distinct TTL renews
 * them all (each lease has the TTL it was taken with).
 * Each lease has its own deadline, signal and `release()`, as a `Lease` has.
 *
 * ```ts
 * const session = new Session(undefined);            // holder: host:pid:random
 * try {
 *   const a = await session.lease('order:101', { ttlMs: 10_000 });
 *   const b = await session.lease('order:102', { ttlMs: 10_000, waitMs: 5_000 });
 *   ...
 * } finally {
 *   await session.close();   // releases every lease
 * }
 * ```
 */
export class Session implements AsyncDisposable {
  readonly holder: string;
  readonly #connection: ConnectionOptions;
  readonly #conn: KeepaliveConnection;
  readonly #leases = new Set<Lease>();
  #timer: NodeJS.Timeout | null = null;
  #inflight: Promise<void> | null = null;
  #closed = false;
  #closing: Promise<boolean> | null = null;
  readonly #logger: Logger;

  constructor(connection: ConnectionOptions, opts: SessionOptions = {}) {
    if (opts === null || typeof opts !== 'object') throw new TypeError('the session options must be an object');
    this.holder = holderOption(opts.holder);
    this.#logger = loggerOption(opts.logger);
    this.#connection = connection;
    this.#conn = new KeepaliveConnection(connection, `fencing keepalive ${this.holder}`);
  }

  /** The leases held now (not released, not lost). */
  get leases(): Lease[] {
    return [...this.#leases].filter((l) => !l.released && !l.lost);
  }

  /**
   * Acquires a lease on `resource` for the session's holder.  A try (no
   * `waitMs`) runs on the session's connection; a wait on a connection of its
   * own (application_name `fencing acquire <holder>`), so that it does not
   * hold up the renewals.
   */
  async lease(resource: string, opts: Omit<LeaseOptions, 'holder' | 'logger'>): Promise<Lease> {
    if (this.#closed) throw new Error('the session is closed');
    const full = resolveOptions(resource, { ...opts, holder: this.holder, logger: this.#logger });
    let granted: { token: bigint; start: number };
    let start: number;
    if (full.waitMs) {
      const waiting = new KeepaliveConnection(this.#connection, `fencing acquire ${this.holder}`);
      try {
        granted = await acquireOn(waiting, resource, full);
        start = await confirmGrant(waiting, resource, full, granted).catch(async (err) => {
          await releaseOn(waiting, { resource, holder: this.holder, token: granted.token }, CALL_TIMEOUT_MS / 6).catch(() => false);
          throw err;
        });
      } finally {
        await waiting.close();
      }
    } else {
      granted = await acquireOn(this.#conn, resource, full);
      start = granted.start;
    }
    const lease = new Lease(resource, this.holder, full.ttlMs, granted.token, start, this.#logger);
    lease._setOwner(this.#owner);
    this.#leases.add(lease);
    if (this.#closed) {
      await lease.release();
      throw new Error('the session is closed');
    }
    this.#schedule();
    return lease;
  }

  readonly #owner: LeaseOwner = {
    release: async (lease: Lease): Promise<boolean> => {
      this.#leases.delete(lease);
      try {
        return await releaseTwice(this.#conn, lease, LEASE_CALLS);
      } finally {
        if (this.#leases.size === 0 && !this.#closed) this.#schedule();
      }
    },
    lost: (): void => {
      // Kept until released: close() still calls fencing.release() for it.
    },
  };

  #schedule(delayMs?: number): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const live = this.leases;
    if (this.#closed || live.length === 0) return;
    const delay = delayMs ?? Math.min(...live.map((l) => l.lastAcknowledged + l.ttlMs / 3)) - now();
    this.#timer = setTimeout(() => {
      this.#timer = null;
      this.#inflight = this.#tick();
    }, timerDelay(delay));
    this.#timer.unref();
  }

  async #tick(): Promise<void> {
    let failed = false;
    try {
      await this.renewAll();
    } catch {
      failed = true;
    }
    if (this.#closed) return;
    const live = this.leases;
    if (live.length === 0) return;
    if (failed) {
      // Retry (reconnecting) until the deadlines.
      const shortest = Math.min(...live.map((l) => l.ttlMs));
      const soonest = Math.min(...live.map((l) => l.remainingMs));
      this.#schedule(retryDelay(shortest, soonest));
    } else {
      this.#schedule();
    }
  }

  /**
   * Renews every live lease now: one `fencing.renew_all()` per distinct TTL.
   * A lease the server did not renew is lost.  Throws if the server
   * could not be reached (the leases keep their deadlines).
   */
  async renewAll(): Promise<void> {
    const byTtl = new Map<number, Lease[]>();
    for (const lease of this.leases) {
      const group = byTtl.get(lease.ttlMs) ?? [];
      group.push(lease);
      byTtl.set(lease.ttlMs, group);
    }
    let error: unknown = null;
    for (const [ttlMs, group] of byTtl) {
      const start = now();
      const soonest = Math.min(...group.map((l) => l.deadline)) - start;
      const timeout = Math.max(1, Math.min(ttlMs / 3, soonest));
      const values = [this.holder, ttlMs, group.map((l) => l.resource), group.map((l) => l.token.toString())];
      let rows: { resource: string; token: string; renewed: boolean }[];
      try {
        rows = await this.#renewGroup(values, timeout);
      } catch (err) {
        error = err;
        continue;
      }
      for (const lease of group) {
        if (lease.released) continue;
        const row = rows.find((r) => r.resource === lease.resource && r.token === lease.token.toString());
        if (row?.renewed === true) lease._acknowledge(start);
        else lease._lose('a renewal was refused');
      }
    }
    if (error) throw error;
  }

  async #renewGroup(values: unknown[], timeout: number): Promise<{ resource: string; token: string; renewed: boolean }[]> {
    const { result } = await this.#conn.query(
      `SELECT resource, token::text AS token, renewed FROM fencing.renew_all($1, ${interval(2)}, $3::text[], $4::bigint[])`,
      values,
      timeout,
    );
    return result.rows;
  }

  /**
   * Stops the renewals, releases every lease and closes the connection.
   * Resolves to true if the server released every lease the session still
   * had (false if one was lost).  Rejects with the first network error once
   * every release was tried (those leases end at their TTL).
   */
  async close(): Promise<boolean> {
    if (this.#closed) return this.#closing ?? true;
    this.#closed = true;
    this.#closing = (async () => {
      if (this.#timer) clearTimeout(this.#timer);
      this.#timer = null;
      await this.#inflight?.catch(() => {});
      const released = await Promise.allSettled([...this.#leases].map((l) => l.release()));
      await this.#conn.close();
      const failed = released.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (failed) throw failed.reason;
      return released.every((r) => r.status === 'fulfilled' && r.value);
    })();
    return this.#closing;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
