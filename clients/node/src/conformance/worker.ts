/**
 * The conformance worker of the Node client (clients/conformance/PROTOCOL.md):
 * one JSON request per line on stdin, one JSON answer per line on stdout.
 * Logs go to stderr.  Connects with PGHOST, PGPORT, PGUSER, PGDATABASE.
 */
import { createInterface } from 'node:readline';
import { Client } from 'pg';
import {
  FencingError,
  Lease,
  LeaseAlreadyHeldError,
  LeaseLostError,
  LeaseTimeoutError,
  MissingTokenError,
  Session,
  StaleTokenError,
  fenced,
  staleRefusalCount,
} from '../index';

type Request = Record<string, unknown> & { op?: string };
type Answer = Record<string, unknown>;

const leases = new Map<string, Lease>();
const sessions = new Map<string, Session>();
let callbacks = 0;
let work: Client | null = null;

function log(...args: unknown[]): void {
  process.stderr.write(`[node worker] ${args.map(String).join(' ')}\n`);
}

/** JSON with bigints written as plain integers (tokens may exceed 2^53). */
function stringify(answer: Answer): string {
  return JSON.stringify(answer, (_k, v) => (typeof v === 'bigint' ? `\u0000bigint:${v}` : v)).replace(
    /"\\u0000bigint:(-?\d+)"/g,
    '$1',
  );
}

/** JSON.parse, keeping "token" integers exact (as strings). */
function parse(line: string): Request {
  return JSON.parse(line.replace(/("token"\s*:\s*)(-?\d+)(?=\s*[,}])/g, '$1"$2"')) as Request;
}

function seconds(v: unknown): number | null {
  return v === null || v === undefined ? null : Number(v) * 1000;
}

async function workConnection(): Promise<Client> {
  if (work) return work;
  const client = new Client({ application_name: 'fencing conformance worker' });
  const drop = () => {
    if (work === client) work = null;
  };
  client.on('error', (err) => {
    log('work connection:', err.message);
    drop();
  });
  client.on('end', drop);
  await client.connect();
  work = client;
  return client;
}

function leaseOf(resource: unknown): Lease {
  const lease = leases.get(String(resource));
  if (!lease) throw new Error(`no lease on ${String(resource)}`);
  return lease;
}

function failure(err: unknown): Answer {
  const message = err instanceof Error ? err.message : String(err);
  if (err instanceof StaleTokenError || err instanceof MissingTokenError) {
    return {
      ok: false,
      error: err instanceof StaleTokenError ? 'StaleToken' : 'MissingToken',
      message,
      table: err.table,
      column: err.column,
      constraint: err.constraint,
      key: err.key,
      presented: err.presented,
      stored: err.stored,
    };
  }
  const name =
    err instanceof LeaseLostError
      ? 'LeaseLost'
      : err instanceof LeaseTimeoutError
        ? 'LeaseTimeout'
        : err instanceof LeaseAlreadyHeldError
          ? 'LeaseAlreadyHeld'
          : 'Other';
  return { ok: false, error: name, message };
}

class Raised extends Error {}

async function handle(req: Request): Promise<Answer> {
  switch (req.op) {
    case 'lease': {
      const resource = String(req.resource);
      const lease = await Lease.acquire(undefined, resource, {
        holder: String(req.holder),
        ttlMs: seconds(req.ttl)!,
        waitMs: seconds(req.wait),
      });
      const previous = leases.get(resource);
      leases.set(resource, lease);
      if (previous) void previous.release();
      return { ok: true, token: lease.token };
    }
    case 'session': {
      const session = new Session(undefined, { holder: String(req.holder) });
      const tokens: bigint[] = [];
      try {
        for (const resource of req.resources as string[]) {
          const lease = await session.lease(resource, { ttlMs: seconds(req.ttl)! });
          tokens.push(lease.token);
        }
      } catch (err) {
        await session.close();
        throw err;
      }
      for (const lease of session.leases) {
        const previous = leases.get(lease.resource);
        if (previous) void previous.release();
        leases.set(lease.resource, lease);
        sessions.set(lease.resource, session);
      }
      return { ok: true, tokens };
    }
    case 'status': {
      const lease = leaseOf(req.resource);
      const lost = lease.lost;
      return { ok: true, token: lease.token, lost, remaining: lease.remainingMs / 1000 };
    }
    case 'await_lost': {
      const lease = leaseOf(req.resource);
      const signal = lease.signal;
      if (!signal.aborted) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(done, Math.max(0, seconds(req.timeout) ?? 0));
          function done() {
            clearTimeout(timer);
            signal.removeEventListener('abort', done);
            resolve();
          }
          signal.addEventListener('abort', done);
        });
      }
      return { ok: true, lost: lease.lost };
    }
    case 'write': {
      const sql = String(req.sql);
      const target =
        req.resource !== undefined && req.resource !== null
          ? leaseOf(req.resource)
          : req.token !== undefined && req.token !== null
            ? BigInt(req.token as string)
            : null;
      let client: Client;
      try {
        client = await workConnection();
      } catch (err) {
        throw new Error(`cannot connect: ${(err as Error).message}`);
      }
      try {
        const rows = await fenced(
          client,
          target,
          async (c) => {
            const result = (await c.query(sql)) as unknown;
            const results = Array.isArray(result) ? result : [result];
            return results.reduce((n: number, r: { rowCount?: number | null }) => n + (r.rowCount ?? 0), 0);
          },
          { onStale: () => void callbacks++ },
        );
        return { ok: true, rows };
      } catch (err) {
        // A broken connection (no SQLSTATE, not one of the client's errors): reconnect next time.
        const code = (err as { code?: string }).code;
        if (!code && !(err instanceof FencingError)) {
          if (work === client) work = null;
          void client.end().catch(() => {});
        }
        throw err;
      }
    }
    case 'release': {
      const resource = String(req.resource);
      const session = sessions.get(resource);
      if (session) {
        for (const [r, s] of sessions) {
          if (s === session) {
            sessions.delete(r);
            leases.delete(r);
          }
        }
        return { ok: true, released: await session.close() };
      }
      const lease = leaseOf(resource);
      leases.delete(resource);
      return { ok: true, released: await lease.release() };
    }
    case 'raise_inside': {
      let token: bigint | null = null;
      try {
        const lease = await Lease.acquire(undefined, String(req.resource), {
          holder: String(req.holder),
          ttlMs: seconds(req.ttl)!,
        });
        try {
          token = lease.token;
          throw new Raised('raised inside the lease');
        } finally {
          await lease.release();
        }
      } catch (err) {
        if (!(err instanceof Raised)) throw err;
      }
      return { ok: true, token };
    }
    case 'stale_count':
      return { ok: true, count: staleRefusalCount(), callbacks };
    case 'quit':
      return { ok: true };
    default:
      return { ok: false, error: 'Other', message: `unknown op ${String(req.op)}` };
  }
}

async function shutdown(): Promise<void> {
  const closing: Promise<unknown>[] = [];
  for (const session of new Set(sessions.values())) closing.push(session.close());
  for (const [resource, lease] of leases) if (!sessions.has(resource)) closing.push(lease.release());
  await Promise.all(closing);
  if (work) await work.end().catch(() => {});
}

async function main(): Promise<void> {
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity, terminal: false });
  for await (const line of rl) {
    if (line.trim() === '') continue;
    let answer: Answer;
    let req: Request = {};
    try {
      req = parse(line);
      answer = await handle(req);
    } catch (err) {
      answer = failure(err);
      if (answer.error === 'Other') log(req.op ?? '?', 'failed:', err instanceof Error ? err.stack : err);
    }
    process.stdout.write(stringify(answer) + '\n');
    if (req.op === 'quit') break;
  }
  await shutdown();
  process.exit(0);
}

main().catch((err) => {
  log('fatal:', err instanceof Error ? err.stack : err);
  process.exit(1);
});
