/**
 * The conformance worker of the Node client (clients/conformance/PROTOCOL.md):
 * one JSON request per line on stdin, one JSON answer per line on stdout.
 * Logs go to stderr.  Connects with PGHOST, PGPORT, PGUSER, PGDATABASE.
 */
import { createInterface } from 'node:readline';
import { Client } from 'pg';
import {
  Election,
  FencingError,
  Lease,
  LeaseAlreadyHeldError,
  LeaseBusyError,
  LeaseLostError,
  LeaseTimeoutError,
  MissingTokenError,
  Session,
  StaleTokenError,
  fenced,
  staleRefusalCount,
  withLease,
} from '../index';

type Request = Record<string, unknown> & { op?: string };
type Answer = Record<string, unknown>;

const leases = new Map<string, Lease>();
/** The acquisitions of lease_async, by resource. */
const pending = new Map<string, { controller: AbortController; done: Promise<Answer>; settled: boolean }>();
/** The elections of campaign / observe, by name, with every callback so far. */
const elections = new Map<string, { election: Election; events: Answer[] }>();
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
  return v === null || v === undefined ? null : v === 'forever' ? Infinity : Number(v) * 1000;
}

function holder(v: unknown): string | null {
  return v === null || v === undefined ? null : String(v);
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, Math.max(0, ms));
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done);
  });
}

/** The rows a fenced write of `sql` changed (every statement of it). */
async function write(target: Lease | Election | bigint | null, sql: string, holdMs = 0): Promise<Answer> {
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
        const n = results.reduce((n: number, r: { rowCount?: number | null }) => n + (r.rowCount ?? 0), 0);
        if (holdMs > 0) await sleep(holdMs);
        return n;
      },
      { onStale: () => void callbacks++ },
    );
    return { ok: true, rows };
  } catch (err) {
    // A broken connection (no SQLSTATE, or one the server ended): reconnect next time.
    const cause = err instanceof LeaseLostError && err.cause ? err.cause : err;
    const code = (cause as { code?: string }).code;
    if ((!code && !(cause instanceof FencingError)) || /^(08|57P|25P03)/.test(code ?? '')) {
      if (work === client) work = null;
      void client.end().catch(() => {});
    }
    throw err;
  }
}

function electionOf(name: unknown): { election: Election; events: Answer[] } {
  const entry = elections.get(String(name));
  if (!entry) throw new Error(`no election ${String(name)} in this worker`);
  return entry;
}

function newElection(name: string, candidate: string | null, ttlMs: number | undefined, recampaign: boolean) {
  const events: Answer[] = [];
  const election = new Election(undefined, name, {
    candidate,
    ttlMs,
    recampaign,
    onStartedLeading: (token) => events.push({ kind: 'started', holder: election.candidate, token }),
    onStoppedLeading: () => events.push({ kind: 'stopped', holder: election.candidate, token: null }),
    onNewLeader: (h, token) => events.push({ kind: 'new_leader', holder: h, token }),
  });
  const entry = { election, events };
  elections.set(name, entry);
  return entry;
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
      : err instanceof LeaseBusyError
        ? 'LeaseBusy'
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
        holder: holder(req.holder),
        ttlMs: seconds(req.ttl)!,
        waitMs: seconds(req.wait),
      });
      keep(lease);
      return { ok: true, token: lease.token, holder: lease.holder };
    }
    case 'lease_async': {
      const resource = String(req.resource);
      const controller = new AbortController();
      const entry = {
        controller,
        settled: false,
        done: Lease.acquire(undefined, resource, {
          holder: holder(req.holder),
          ttlMs: seconds(req.ttl)!,
          waitMs: seconds(req.wait),
          signal: controller.signal,
        }).then(
          (lease): Answer => {
            keep(lease);
            return { ok: true, token: lease.token, holder: lease.holder };
          },
          (err: unknown): Answer => failure(err),
        ),
      };
      void entry.done.then(() => (entry.settled = true));
      pending.set(resource, entry);
      return { ok: true };
    }
    case 'await_lease': {
      const entry = pending.get(String(req.resource));
      if (!entry) throw new Error(`no lease_async on ${String(req.resource)}`);
      const answer = await Promise.race([entry.done, sleep(seconds(req.timeout) ?? 0).then(() => null)]);
      return answer ?? { ok: false, error: 'Other', message: 'pending' };
    }
    case 'cancel': {
      const entry = pending.get(String(req.resource));
      if (!entry) throw new Error(`no lease_async on ${String(req.resource)}`);
      const before = entry.settled;
      entry.controller.abort(new Error('cancelled'));
      const answer = await entry.done;
      return { ok: true, cancelled: !before && answer.ok !== true };
    }
    case 'do': {
      const resource = String(req.resource);
      const sql = String(req.sql);
      const holdMs = seconds(req.hold) ?? 0;
      let token: bigint | null = null;
      const rows = await withLease(undefined, resource, { holder: holder(req.holder), ttlMs: seconds(req.ttl)! }, async (lease) => {
        token = lease.token;
        const written = await write(lease, sql);
        await sleep(holdMs, lease.signal);
        lease.signal.throwIfAborted();
        return written.rows;
      });
      return { ok: true, token, rows };
    }
    case 'write_hold':
      return await write(leaseOf(req.resource), String(req.sql), seconds(req.hold) ?? 0);
    case 'campaign': {
      const name = String(req.election);
      const existing = elections.get(name);
      if (existing) await existing.election.close();
      const { election } = newElection(name, holder(req.candidate), seconds(req.ttl) ?? undefined, req.recampaign === true);
      election.campaign().catch((err: unknown) => log('campaign', name, 'ended:', err instanceof Error ? err.message : err));
      return { ok: true, candidate: election.candidate };
    }
    case 'election_status': {
      const { election } = electionOf(req.election);
      return { ok: true, leader: election.isLeader, token: election.token };
    }
    case 'await_leader': {
      const { election } = electionOf(req.election);
      const until = performance.now() + (seconds(req.timeout) ?? 0);
      while (!election.isLeader && performance.now() < until) await sleep(Math.min(20, until - performance.now()));
      return { ok: true, leader: election.isLeader, token: election.token };
    }
    case 'observe': {
      const name = String(req.election);
      const entry = elections.get(name) ?? newElection(name, null, undefined, false);
      await entry.election.observe();
      return { ok: true };
    }
    case 'events':
      return { ok: true, events: electionOf(req.election).events };
    case 'current_leader': {
      const leader = await electionOf(req.election).election.leader();
      return { ok: true, holder: leader?.holder ?? null, token: leader?.token ?? null };
    }
    case 'resign':
      return { ok: true, resigned: await electionOf(req.election).election.resign() };
    case 'session': {
      const session = new Session(undefined, { holder: holder(req.holder) });
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
      if (req.election !== undefined && req.election !== null) return await write(electionOf(req.election).election, sql);
      const target =
        req.resource !== undefined && req.resource !== null
          ? leaseOf(req.resource)
          : req.token !== undefined && req.token !== null
            ? BigInt(req.token as string)
            : null;
      return await write(target, sql);
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
          holder: holder(req.holder),
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

/** The lease of its resource from now on (the one held before released). */
function keep(lease: Lease): void {
  const previous = leases.get(lease.resource);
  leases.set(lease.resource, lease);
  if (previous && previous !== lease) void previous.release().catch(() => false);
}

async function shutdown(): Promise<void> {
  const closing: Promise<unknown>[] = [];
  for (const entry of pending.values()) entry.controller.abort(new Error('shutdown'));
  for (const { election } of elections.values()) closing.push(election.close().catch(() => undefined));
  for (const session of new Set(sessions.values())) closing.push(session.close().catch(() => false));
  for (const [resource, lease] of leases) if (!sessions.has(resource)) closing.push(lease.release().catch(() => false));
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
