import { connect as netConnect } from 'node:net';
import { Client, type ClientConfig, type QueryResult } from 'pg';
import { UnsupportedServerError } from './errors';

/** How to reach the server: a node-postgres config, a connection string, or nothing (the PG* environment). */
export type ConnectionOptions = ClientConfig | string | undefined;

/** The monotonic clock of every deadline, in milliseconds (`performance.now()`). */
export function now(): number {
  return performance.now();
}

/** The largest delay of Node's timers and of the server's timeouts: INT_MAX ms (~24.8 days). */
export const MAX_DELAY_MS = 2 ** 31 - 1;

/**
 * A delay in milliseconds that Node's timers keep: within 0..MAX_DELAY_MS (a
 * longer one, as a third of a ttl of up to 366 days is, fires at once).
 */
export function timerDelay(ms: number): number {
  return Math.min(Math.max(0, ms), MAX_DELAY_MS);
}

/** A notice the server sent while a query ran (node-postgres' `NoticeMessage`). */
export interface Notice {
  code?: string;
  message?: string;
  detail?: string;
}

/**
 * @internal The lease's (or session's) own connection, application_name
 * `fencing keepalive <holder>`: never the caller's.  It reconnects on the
 * next query after it broke (terminated backend, server restart, a query that
 * hung past its timeout).
 */
export class KeepaliveConnection {
  private client: Client | null = null;
  private connecting: Promise<Client> | null = null;
  private closed = false;
  private readonly config: ClientConfig;

  constructor(options: ConnectionOptions, applicationName: string) {
    const base: ClientConfig = typeof options === 'string' ? { connectionString: options } : { ...(options ?? {}) };
    this.config = { ...base, application_name: applicationName, keepAlive: true };
  }

  private connect(timeoutMs: number): Promise<Client> {
    if (this.client) return Promise.resolve(this.client);
    if (this.connecting) return this.connecting;
    const client = new Client({ ...this.config, connectionTimeoutMillis: timerDelay(Math.max(1, Math.ceil(timeoutMs))) });
    client.on('error', () => this.discard(client));
    client.on('end', () => this.discard(client));
    this.connecting = client
      .connect()
      .then(() => checkServer(client))
      .then(
        () => {
          this.connecting = null;
          if (this.closed) {
            void client.end().catch(() => {});
            throw new Error('connection closed');
          }
          this.client = client;
          return client;
        },
        (err: unknown) => {
          this.connecting = null;
          this.discard(client);
          throw err;
        },
      );
    return this.connecting;
  }

  private discard(client: Client): void {
    if (this.client === client) this.client = null;
    // Destroy the socket: an answer that arrives later must not be taken for a new query's.
    const stream = (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream;
    try {
      stream?.destroy();
    } catch {
      /* already gone */
    }
    void client.end().catch(() => {});
  }

  /**
   * Runs one query, connecting first if needed; if no answer comes within
   * `timeoutMs` (connecting included), the connection is dropped and the
   * query fails.  Resolves with the result and the notices it raised.
   *
   * With a `signal`: aborted before the query is sent, nothing is sent and
   * the signal's reason is thrown; aborted while it runs, the query is
   * cancelled with the protocol's cancel request (what `pg_cancel_backend()`
   * does, sent again every half second until the query ended: a request that
   * reached the backend before the query did is ignored by the server), so
   * the server ends it (57014) and nothing of it stays behind; the
   * connection stays usable.
   */
  query(
    text: string,
    values: unknown[],
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ result: QueryResult; notices: Notice[] }> {
    // One query at a time (node-postgres deprecates queueing on a busy client);
    // each one's timeout counts from its own start.
    const run = this.tail.then(() => this.run(text, values, timeoutMs, signal));
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private tail: Promise<void> = Promise.resolve();

  private async run(
    text: string,
    values: unknown[],
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<{ result: QueryResult; notices: Notice[] }> {
    if (this.closed) throw new Error('connection closed');
    const started = now();
    let timer: NodeJS.Timeout | undefined;
    let client: Client | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (client) this.discard(client);
        reject(new Error(`no answer from the server within ${Math.round(timeoutMs)} ms`));
      }, timerDelay(Math.max(1, timeoutMs)));
      timer.unref();
    });
    const notices: Notice[] = [];
    const onNotice = (n: Notice) => notices.push(n);
    let cancelling: NodeJS.Timeout | undefined;
    const onAbort = () => {
      const target = client!;
      const send = () => void sendCancel(target).catch(() => {});
      send();
      cancelling = setInterval(send, 500);
      cancelling.unref();
    };
    try {
      signal?.throwIfAborted();
      client = await Promise.race([this.connect(timeoutMs), timeout]);
      signal?.throwIfAborted();
      client.on('notice', onNotice);
      const remaining = timeoutMs - (now() - started);
      if (remaining <= 0) {
        this.discard(client);
        throw new Error(`no answer from the server within ${Math.round(timeoutMs)} ms`);
      }
      const pending = client.query(text, values); // sent now: a cancel from here on reaches it
      signal?.addEventListener('abort', onAbort, { once: true });
      const result = await Promise.race([pending, timeout]);
      return { result, notices };
    } catch (err) {
      // A database error leaves the connection usable; anything else (a broken
      // socket, a timeout, an administrator's termination) does not.
      const code = (err as { code?: string }).code;
      if (client && (!code || code.startsWith('08') || code.startsWith('57P'))) this.discard(client);
      throw err;
    } finally {
      clearTimeout(timer);
      clearInterval(cancelling);
      signal?.removeEventListener('abort', onAbort);
      client?.removeListener('notice', onNotice);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client ?? (this.connecting ? await this.connecting.catch(() => null) : null);
    this.client = null;
    if (client) await client.end().catch(() => {});
  }
}

/** SQL for an interval parameter given in milliseconds. */
export function interval(param: number): string {
  return `($${param}::float8 * interval '1 millisecond')`;
}

/** The version this client needs of the fencing extension. */
const REQUIRED = [0, 4, 0];

/** @internal Throws `UnsupportedServerError` if the database's fencing extension is absent or older than 0.4.0. */
export async function checkServer(client: Client): Promise<void> {
  const { rows } = await client.query("SELECT extversion FROM pg_catalog.pg_extension WHERE extname = 'fencing'");
  const version = (rows[0]?.extversion as string | undefined) ?? null;
  if (version === null || !atLeast(version, REQUIRED)) throw new UnsupportedServerError(version);
}

/** `version` (`0.4.0`, `1.2`, `0.5.0dev`) is at least `required`, compared number by number. */
export function atLeast(version: string, required: number[]): boolean {
  const parts = version.split('.').map((p) => parseInt(p, 10));
  for (let i = 0; i < required.length; i++) {
    const part = Number.isNaN(parts[i]) || parts[i] === undefined ? 0 : parts[i]!;
    if (part !== required[i]) return part > required[i]!;
  }
  return true;
}

/** Sends the cancel request of the protocol for `client`'s query in flight (a new socket to the same server). */
function sendCancel(client: Client): Promise<void> {
  const c = client as unknown as { host: string; port: number; processID: number | null; secretKey: number | null };
  if (c.processID === null || c.secretKey === null) return Promise.resolve();
  const request = Buffer.alloc(16);
  request.writeInt32BE(16, 0);
  request.writeInt32BE(80877102, 4); // the cancel request code
  request.writeInt32BE(c.processID, 8);
  request.writeInt32BE(c.secretKey, 12);
  return new Promise((resolve, reject) => {
    const socket = c.host.startsWith('/') ? netConnect(`${c.host}/.s.PGSQL.${c.port}`) : netConnect(c.port, c.host);
    socket.setTimeout(CANCEL_TIMEOUT_MS, () => socket.destroy(new Error('the cancel request got no answer')));
    socket.on('connect', () => socket.end(request));
    socket.on('error', reject);
    socket.on('close', () => resolve());
  });
}

const CANCEL_TIMEOUT_MS = 10_000;
