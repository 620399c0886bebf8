import { Client, type ClientConfig, type Notification } from 'pg';
import { KeepaliveConnection, checkServer, timerDelay, type ConnectionOptions } from './connection';
import { LeaseLostError } from './errors';
import { holderOption, loggerOption, type Logger } from './identity';
import {
  Lease,
  acquireOwn,
  checkResource,
  checkSignal,
  checkTtl,
  checkWait,
  retryDelay,
  type LeaseCalls,
} from './lease';

/** The channel `fencing.campaign()` and `fencing.resign()` notify at commit, the payload the election's name. */
export const ELECTION_CHANNEL = 'fencing_election';

/** The TTL of a leadership when `ttlMs` is left out. */
export const ELECTION_TTL_MS = 15_000;

const ELECTION_CALLS: LeaseCalls = { acquire: 'fencing.campaign', release: 'fencing.resign' };
const CALL_TIMEOUT_MS = 30_000;

export interface ElectionOptions {
  /** This process's name in the election; left out: a new `<host>:<pid>:<random>` (`election.candidate`). */
  candidate?: string | null;
  /** The leadership's TTL in milliseconds (a lease's), renewed every third of it; 15 000 when left out. */
  ttlMs?: number;
  /** A leader that lost its leadership (not one that resigned) campaigns again, waiting in line. */
  recampaign?: boolean;
  /** Where a lost leadership is logged (`warn`), and a callback's error; `console` when left out. */
  logger?: Logger;
  /** This candidate became the leader, with `token`. */
  onStartedLeading?: (token: bigint) => void;
  /** This candidate is no longer the leader (lost, or resigned). */
  onStoppedLeading?: () => void;
  /** While observing: the leader changed (`holder` null: none now). */
  onNewLeader?: (holder: string | null, token: bigint | null) => void;
}

/** The live leadership of an election, as `fencing.leader()` reads it. */
export interface Leader {
  holder: string;
  token: bigint;
  /** When the leadership ends unless renewed (the server's clock). */
  expiresAt: Date;
}

function callback<F>(value: F | undefined | null, name: string): F | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'function') throw new TypeError(`${name} must be a function`);
  return value;
}

/**
 * Leader election on the server: a leadership IS a lease on the resource
 * named by the election (`fencing.leases` shows it, its token fences the
 * leader's writes through `fenced()`), granted by `fencing.campaign()` in
 * the order candidates asked, kept alive like any lease, given up by
 * `fencing.resign()`.  Anyone reads the leader with `leader()`
 * (`fencing.leader()`); `observe()` follows every change without polling
 * (LISTEN `fencing_election` on a connection of its own, and a timer at the
 * leader's `expires_at`, since an expiry without a successor notifies no one).
 *
 * ```ts
 * const election = new Election(undefined, 'billing-leader', { onStoppedLeading: () => process.exit(1) });
 * const lease = await election.campaign();          // waits in line until leader
 * await fenced(pool, election, (c) => c.query('UPDATE ...'));
 * await election.close();                           // resigns
 * ```
 */
export class Election implements AsyncDisposable {
  readonly election: string;
  readonly candidate: string;
  readonly ttlMs: number;
  readonly recampaign: boolean;
  readonly #connection: ConnectionOptions;
  readonly #logger: Logger;
  readonly #onStarted: ((token: bigint) => void) | undefined;
  readonly #onStopped: (() => void) | undefined;
  readonly #onNewLeader: ((holder: string | null, token: bigint | null) => void) | undefined;
  #lease: Lease | null = null;
  #campaigning: Promise<Lease> | null = null;
  #stopCampaign = new AbortController();
  #resigned = false;
  #closed = false;
  #reader: KeepaliveConnection | null = null;
  #observer: Observer | null = null;

  constructor(connection: ConnectionOptions, election: string, opts: ElectionOptions = {}) {
    checkResource(election, 'election');
    if (opts === null || typeof opts !== 'object') throw new TypeError('the election options must be an object');
    if (opts.recampaign !== undefined && typeof opts.recampaign !== 'boolean') throw new TypeError('recampaign must be a boolean');
    this.election = election;
    this.candidate = holderOption(opts.candidate, 'candidate');
    this.ttlMs = opts.ttlMs === undefined ? ELECTION_TTL_MS : checkTtl(opts.ttlMs);
    this.recampaign = opts.recampaign ?? false;
    this.#logger = loggerOption(opts.logger);
    this.#onStarted = callback(opts.onStartedLeading, 'onStartedLeading');
    this.#onStopped = callback(opts.onStoppedLeading, 'onStoppedLeading');
    this.#onNewLeader = callback(opts.onNewLeader, 'onNewLeader');
    this.#connection = connection;
  }

  /** True while this candidate leads (its leadership neither lost nor resigned; reads the clock). */
  get isLeader(): boolean {
    return this.#lease !== null && !this.#lease.lost && !this.#lease.released;
  }

  /** The leadership's lease while leading, else null. */
  get lease(): Lease | null {
    return this.isLeader ? this.#lease : null;
  }

  /** The leadership's token while leading, else null. */
  get token(): bigint | null {
    return this.lease?.token ?? null;
  }

  /** The loss signal of the current leadership (a lease's `signal`), null when not leading. */
  get signal(): AbortSignal | null {
    return this.lease?.signal ?? null;
  }

  /** The lease of the leadership; throws `LeaseLostError` when not leading (what `fenced()` uses). */
  leadership(): Lease {
    const lease = this.lease;
    if (!lease) throw new LeaseLostError(this.election, this.#lease?.token ?? null, `${this.candidate} is not the leader`);
    return lease;
  }

  /**
   * Campaigns (`fencing.campaign()`), waiting in line until this candidate
   * leads (`waitMs` left out: until granted; 0 or null: a try,
   * `LeaseBusyError` if another leads), ended by `signal` or by `resign()` /
   * `close()` (the server-side call is cancelled).  Resolves with the
   * leadership's lease; calls `onStartedLeading(token)` first.  Already
   * leading or campaigning: the same answer.
   */
  campaign(opts: { waitMs?: number | null; signal?: AbortSignal } = {}): Promise<Lease> {
    if (opts === null || typeof opts !== 'object') throw new TypeError('the campaign options must be an object');
    const waitMs = opts.waitMs === undefined ? Infinity : checkWait(opts.waitMs);
    const signal = checkSignal(opts.signal);
    if (this.#closed) return Promise.reject(new Error('the election is closed'));
    if (this.isLeader) return Promise.resolve(this.#lease!);
    if (this.#campaigning) return this.#campaigning;
    this.#resigned = false;
    if (this.#stopCampaign.signal.aborted) this.#stopCampaign = new AbortController();
    const ended = signal ? AbortSignal.any([signal, this.#stopCampaign.signal]) : this.#stopCampaign.signal;
    const campaigning = acquireOwn(
      this.#connection,
      this.election,
      { holder: this.candidate, ttlMs: this.ttlMs, waitMs, signal: ended, logger: this.#logger },
      ELECTION_CALLS,
    ).then(
      (lease) => {
        this.#campaigning = null;
        this.#started(lease);
        return lease;
      },
      (err: unknown) => {
        this.#campaigning = null;
        throw err;
      },
    );
    this.#campaigning = campaigning;
    return campaigning;
  }

  #started(lease: Lease): void {
    this.#lease = lease;
    lease.signal.addEventListener('abort', () => this.#lost(lease), { once: true });
    this.#call('onStartedLeading', () => this.#onStarted?.(lease.token));
    if (lease.lost) this.#lost(lease); // lost already (a frozen process): the abort came before the listener
  }

  #lost(lease: Lease): void {
    if (this.#lease !== lease) return;
    this.#lease = null;
    void lease.release().catch(() => false);
    this.#call('onStoppedLeading', () => this.#onStopped?.());
    if (this.recampaign && !this.#resigned && !this.#closed) void this.#campaignAgain();
  }

  async #campaignAgain(): Promise<void> {
    while (!this.#resigned && !this.#closed && !this.isLeader) {
      try {
        await this.campaign();
        return;
      } catch (err) {
        if (this.#resigned || this.#closed) return;
        this.#logger.warn(`fencing: campaign for ${this.election} failed (candidate ${this.candidate}): ${String((err as Error)?.message ?? err)}`);
        await new Promise((resolve) => setTimeout(resolve, retryDelay(this.ttlMs, 1000)).unref());
      }
    }
  }

  #call(name: string, fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.#logger.warn(`fencing: ${name} of election ${this.election} threw: ${String((err as Error)?.message ?? err)}`);
    }
  }

  /**
   * Gives up the leadership (`fencing.resign()`: the next candidate in line
   * leads at once) and ends a campaign still waiting.  Resolves to true if
   * the server had this leadership and released it, false if it was not
   * leading (or had lost it); calls `onStoppedLeading()` when it led.
   * A lost leadership is not campaigned again after `resign()`.
   */
  async resign(): Promise<boolean> {
    this.#resigned = true;
    this.#stopCampaign.abort(new Error('resigned'));
    await this.#campaigning?.catch(() => undefined);
    const lease = this.#lease;
    if (!lease) return false;
    this.#lease = null;
    const led = !lease.lost;
    try {
      return await lease.release();
    } finally {
      if (led) this.#call('onStoppedLeading', () => this.#onStopped?.());
    }
  }

  /** The live leader (`fencing.leader()`), or null when none leads. */
  async leader(): Promise<Leader | null> {
    if (this.#closed) throw new Error('the election is closed');
    this.#reader ??= new KeepaliveConnection(this.#connection, `fencing election ${this.candidate}`);
    const { result } = await this.#reader.query(
      'SELECT holder, token::text AS token, expires_at FROM fencing.leader($1)',
      [this.election],
      CALL_TIMEOUT_MS,
    );
    const row = result.rows[0];
    return row ? { holder: row.holder as string, token: BigInt(row.token as string), expiresAt: row.expires_at as Date } : null;
  }

  /**
   * Follows the leader: `onNewLeader(holder, token)` at every change, in
   * order (holder null: none leads now).  LISTENs on `fencing_election` on a
   * connection of its own (`fencing observe <candidate>`), reads
   * `fencing.leader()` at each notification of this election and at the
   * leader's `expires_at`; reconnects if that connection breaks.  Resolves
   * once listening (the first read done).  Ends with `close()`.
   */
  async observe(): Promise<void> {
    if (this.#closed) throw new Error('the election is closed');
    if (!this.#observer) {
      this.#observer = new Observer(this.#connection, this.election, `fencing observe ${this.candidate}`, this.#logger, (holder, token) =>
        this.#call('onNewLeader', () => this.#onNewLeader?.(holder, token)),
      );
    }
    const observer = this.#observer;
    try {
      await observer.started;
    } catch (err) {
      if (this.#observer === observer) this.#observer = null;
      throw err;
    }
  }

  /** Resigns, stops observing, closes every connection. */
  async close(): Promise<void> {
    if (this.#closed) return;
    try {
      await this.resign();
    } finally {
      this.#closed = true;
      await this.#observer?.close();
      await this.#reader?.close();
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** The LISTEN connection of `observe()`. */
class Observer {
  readonly started: Promise<void>;
  #client: Client | null = null;
  #timer: NodeJS.Timeout | null = null;
  #reading: Promise<void> = Promise.resolve();
  #holder: string | null = null;
  #token: bigint | null = null;
  #closed = false;
  readonly #config: ClientConfig;

  constructor(
    connection: ConnectionOptions,
    private readonly election: string,
    applicationName: string,
    private readonly logger: Logger,
    private readonly changed: (holder: string | null, token: bigint | null) => void,
  ) {
    const base: ClientConfig = typeof connection === 'string' ? { connectionString: connection } : { ...(connection ?? {}) };
    this.#config = { ...base, application_name: applicationName, keepAlive: true };
    this.started = this.#connect();
  }

  async #connect(): Promise<void> {
    const client = new Client(this.#config);
    client.on('notification', (msg: Notification) => {
      if (msg.channel === ELECTION_CHANNEL && msg.payload === this.election) this.#refresh();
    });
    client.on('error', () => this.#broken(client));
    client.on('end', () => this.#broken(client));
    try {
      await client.connect();
      await checkServer(client);
      await client.query(`LISTEN ${ELECTION_CHANNEL}`);
    } catch (err) {
      void client.end().catch(() => {});
      throw err;
    }
    if (this.#closed) {
      await client.end().catch(() => {});
      return;
    }
    this.#client = client;
    this.#refresh();
    await this.#reading;
  }

  #broken(client: Client): void {
    if (this.#client !== client) return;
    this.#client = null;
    void client.end().catch(() => {});
    if (this.#closed) return;
    const retry = (): void => {
      if (this.#closed) return;
      this.#connect().catch((err: unknown) => {
        this.logger.warn(`fencing: observing ${this.election}: ${String((err as Error)?.message ?? err)}; retrying`);
        setTimeout(retry, 1000).unref();
      });
    };
    setTimeout(retry, 50).unref();
  }

  /** Reads the leader (after any read in flight: the changes come in order). */
  #refresh(): void {
    this.#reading = this.#reading.then(() => this.#read()).catch((err: unknown) => {
      this.logger.warn(`fencing: reading the leader of ${this.election}: ${String((err as Error)?.message ?? err)}`);
    });
  }

  async #read(): Promise<void> {
    const client = this.#client;
    if (!client || this.#closed) return;
    const { rows } = await client.query(
      `SELECT holder, token::text AS token,
              greatest(0, extract(epoch FROM expires_at - clock_timestamp()) * 1000)::float8 AS left_ms
         FROM fencing.leader($1)`,
      [this.election],
    );
    const row = rows[0];
    const holder = row ? (row.holder as string) : null;
    const token = row ? BigInt(row.token as string) : null;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    // An expiry without a successor sends nothing: read again at the deadline.
    if (row) {
      this.#timer = setTimeout(() => this.#refresh(), timerDelay(Number(row.left_ms) + 20));
      this.#timer.unref();
    }
    if (holder !== this.#holder || token !== this.#token) {
      this.#holder = holder;
      this.#token = token;
      this.changed(holder, token);
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearTimeout(this.#timer);
    await this.started.catch(() => undefined);
    await this.#reading;
    const client = this.#client;
    this.#client = null;
    if (client) await client.end().catch(() => {});
  }
}
