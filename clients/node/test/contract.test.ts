import assert from 'node:assert/strict';
import { createServer, connect as netConnect, type AddressInfo, type Socket } from 'node:net';
import { after, before, test } from 'node:test';
import { Client } from 'pg';
import {
  Lease,
  MissingTokenError,
  RETRY_FLOOR_MS,
  RefusedWriteError,
  Session,
  StaleTokenError,
  UnsupportedServerError,
} from '../src/index';
import { atLeast } from '../src/connection';
import { retryDelay } from '../src/lease';
import { connect, protectedTable, unique } from './helpers';

let db: Client;
before(async () => {
  db = await connect();
  await protectedTable(db, unique('contract_setup'));
});
after(async () => {
  await db.end();
});

test('a lost lease is logged with console.warn, in the words every client uses', async () => {
  const resource = unique('order');
  const lines: string[] = [];
  const original = console.warn;
  console.warn = (message: string) => void lines.push(message);
  try {
    const lease = await Lease.acquire(undefined, resource, { ttlMs: 900 });
    await db.query('SELECT fencing.release($1, $2, $3)', [resource, lease.holder, lease.token.toString()]);
    await new Promise((resolve) => lease.signal.addEventListener('abort', resolve));
    assert.deepEqual(lines, [`fencing: lease on ${resource} lost (holder ${lease.holder}, token ${lease.token}): a renewal was refused`]);
    assert.equal(await lease.release(), false, 'a lost lease: false, no throw');
    assert.equal(lines.length, 1, 'release is no loss');
  } finally {
    console.warn = original;
  }
});

test('a logger option takes the loss line instead of the console (a session\'s too)', async () => {
  const resource = unique('order');
  const lines: string[] = [];
  const original = console.warn;
  const consoleLines: unknown[] = [];
  console.warn = (m: unknown) => void consoleLines.push(m);
  const session = new Session(undefined, { logger: { warn: (m) => void lines.push(m) } });
  try {
    const lease = await session.lease(resource, { ttlMs: 600 });
    await db.query('SELECT fencing.release($1, $2, $3)', [resource, lease.holder, lease.token.toString()]);
    await new Promise((resolve) => lease.signal.addEventListener('abort', resolve));
    assert.deepEqual(lines, [`fencing: lease on ${resource} lost (holder ${session.holder}, token ${lease.token}): a renewal was refused`]);
    assert.deepEqual(consoleLines, []);
  } finally {
    console.warn = original;
    assert.equal(await session.close(), false, 'one lease was lost');
  }
});

test('a session renews each lease with its own TTL, at a third of the shortest', async () => {
  const holder = unique('ttl');
  const session = new Session(undefined, { holder });
  try {
    const short = await session.lease(`${holder}:short`, { ttlMs: 900 });
    const long = await session.lease(`${holder}:long`, { ttlMs: 60_000 });
    await new Promise((resolve) => setTimeout(resolve, 1500));
    assert.equal(short.lost, false, 'renewed within its 900 ms');
    const { rows } = await db.query(
      "SELECT resource, round(extract(epoch FROM expires_at - now()))::int AS left FROM fencing.leases WHERE holder = $1 AND live ORDER BY resource",
      [holder],
    );
    assert.equal(rows.length, 2);
    assert.ok(rows[0].left >= 58 && rows[0].left <= 60, `long keeps its 60 s TTL: ${rows[0].left}`);
    assert.ok(rows[1].left <= 1, `short keeps its 900 ms TTL: ${rows[1].left}`);
    assert.ok(long.remainingMs > 58_000);
  } finally {
    assert.equal(await session.close(), true);
  }
});

test('the retry floor after a failed renewal is 50 ms', () => {
  assert.equal(RETRY_FLOOR_MS, 50);
  assert.equal(retryDelay(100, 10_000), 50, 'a tenth of a short TTL is raised to the floor');
  assert.equal(retryDelay(3000, 10_000), 300);
  assert.equal(retryDelay(60_000, 10_000), 1000);
  assert.equal(retryDelay(3000, 20), 20, 'never past the deadline');
});

test('RefusedWriteError is the exported base of both refused writes', () => {
  const stale = new StaleTokenError({ message: 'stale', code: '23T01' });
  const missing = new MissingTokenError({ message: 'missing', code: '23T02' });
  assert.ok(stale instanceof RefusedWriteError);
  assert.ok(missing instanceof RefusedWriteError);
  assert.ok(!(new Error('x') instanceof RefusedWriteError));
});

test('a database without the fencing extension (or below 0.4.0) is refused at connect: UnsupportedServerError', async () => {
  const database = unique('noext');
  await db.query(`CREATE DATABASE ${database}`);
  try {
    await assert.rejects(Lease.acquire({ database }, 'order:1', { ttlMs: 1000 }), (err: unknown) => {
      assert.ok(err instanceof UnsupportedServerError, String(err));
      assert.equal(err.version, null);
      assert.match(err.message, /CREATE EXTENSION fencing/);
      return true;
    });
    const session = new Session({ database });
    await assert.rejects(session.lease('order:1', { ttlMs: 1000 }), UnsupportedServerError);
    await session.close();
    const { rows } = await db.query("SELECT 1 FROM pg_available_extension_versions WHERE name = 'fencing' AND version = '0.3.0'");
    assert.equal(rows.length, 1, 'fencing 0.3.0 is installed alongside');
    const other = new Client({ database });
    await other.connect();
    await other.query("CREATE EXTENSION fencing VERSION '0.3.0'");
    await other.end();
    await assert.rejects(Lease.acquire({ database }, 'order:1', { ttlMs: 1000 }), (err: unknown) => {
      assert.ok(err instanceof UnsupportedServerError, String(err));
      assert.equal(err.version, '0.3.0');
      assert.match(err.message, /0\.3\.0.*ALTER EXTENSION fencing UPDATE/);
      return true;
    });
  } finally {
    await db.query(`DROP DATABASE ${database} WITH (FORCE)`);
  }
});

test('versions compare number by number', () => {
  assert.ok(atLeast('0.4.0', [0, 4, 0]));
  assert.ok(atLeast('0.10.0', [0, 4, 0]));
  assert.ok(atLeast('1.0', [0, 4, 0]));
  assert.ok(!atLeast('0.3.9', [0, 4, 0]));
  assert.ok(!atLeast('0.3.0', [0, 4, 0]));
});

/** A TCP proxy to the test's server (PGHOST, PGPORT), closed by `cut()`: the network gone. */
async function proxy(): Promise<{ port: number; cut: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const host = process.env.PGHOST ?? '/var/run/postgresql';
  const port = Number(process.env.PGPORT ?? 5432);
  const server = createServer((inbound) => {
    const outbound = host.startsWith('/') ? netConnect(`${host}/.s.PGSQL.${port}`) : netConnect(port, host);
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    cut: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

test('release(): a network error is thrown (not false); the lease then ends at its TTL', async () => {
  const resource = unique('order');
  const { port, cut } = await proxy();
  const lease = await Lease.acquire({ host: '127.0.0.1', port }, resource, { ttlMs: 1500, logger: { warn: () => {} } });
  await cut();
  await assert.rejects(lease.release(), (err: unknown) => {
    assert.ok(err instanceof Error && !(err instanceof RefusedWriteError), String(err));
    assert.match((err as Error).message, /ECONNREFUSED|connect|terminated/i);
    return true;
  });
  const { rows } = await db.query('SELECT count(*)::int AS n FROM fencing.leases WHERE resource = $1 AND live', [resource]);
  assert.equal(rows[0].n, 1, 'still held on the server, until its TTL');
});
