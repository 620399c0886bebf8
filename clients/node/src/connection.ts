import { Client, type ClientConfig, type QueryResult } from 'pg';

/** How to reach the server: a node-postgres config, a connection string, or nothing (the PG* environment). */
export type ConnectionOptions = ClientConfig | string | undefined;

/** The monotonic clock of every deadline, in milliseconds (`performance.now()`). */
export function now(): number {
  return performance.now();
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
    const client = new Client({ ...this.config, connectionTimeoutMillis: Math.max(1, Math.ceil(timeoutMs)) });
    client.on('error', () => this.discard(client));
    client.on('end', () => this.discard(client));
    this.connecting = client.connect().then(
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
   */
  query(text: string, values: unknown[], timeoutMs: number): Promise<{ result: QueryResult; notices: Notice[] }> {
    // One query at a time (node-postgres deprecates queueing on a busy client);
    // each one's timeout counts from its own start.
    const run = this.tail.then(() => this.run(text, values, timeoutMs));
    this.tail = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private tail: Promise<void> = Promise.resolve();

  private async run(text: string, values: unknown[], timeoutMs: number): Promise<{ result: QueryResult; notices: Notice[] }> {
    if (this.closed) throw new Error('connection closed');
    const started = now();
    let timer: NodeJS.Timeout | undefined;
    let client: Client | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (client) this.discard(client);
        reject(new Error(`no answer from the server within ${Math.round(timeoutMs)} ms`));
      }, Math.max(1, timeoutMs));
      timer.unref();
    });
    const notices: Notice[] = [];
    const onNotice = (n: Notice) => notices.push(n);
    try {
      client = await Promise.race([this.connect(timeoutMs), timeout]);
      client.on('notice', onNotice);
      const remaining = timeoutMs - (now() - started);
      if (remaining <= 0) {
        this.discard(client);
        throw new Error(`no answer from the server within ${Math.round(timeoutMs)} ms`);
      }
      const result = await Promise.race([client.query(text, values), timeout]);
      return { result, notices };
    } catch (err) {
      // A database error leaves the connection usable; anything else (a broken
      // socket, a timeout, an administrator's termination) does not.
      const code = (err as { code?: string }).code;
      if (client && (!code || code.startsWith('08') || code.startsWith('57P'))) this.discard(client);
      throw err;
    } finally {
      clearTimeout(timer);
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
