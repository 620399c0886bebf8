import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { after, before, test } from 'node:test';
import type { Client } from 'pg';
import { Lease, LeaseAlreadyHeldError, LeaseBusyError, LeaseLostError, LeaseTimeoutError, withLease } from '../src/index';
import { connect, freeze, protectedTable, sleep, unique } from './helpers';

let db: Client;
before(async () => {
  db = await connect();
  await protectedTable(db, unique('lease_setup'));
});
after(async () => {
  await db.end();
});

async function live(resource: string): Promise<{ holder: string; token: string }[]> {
  const { rows } = await db.query('SELECT holder, token::text AS token FROM fencing.leases WHERE resource = $1 AND live', [resource]);
  return rows;
}

test('acquire grants a bigint token; busy, own lease, release', async () => {
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { holder: 'worker-a', ttlMs: 5000 });
  try {
    assert.equal(typeof lease.token, 'bigint');
    assert.ok(lease.token > 0n);
    assert.deepEqual(await live(resource), [{ holder: 'worker-a', token: lease.token.toString() }]);
    await assert.rejects(Lease.acquire(undefined, resource, { holder: 'worker-b', ttlMs: 5000 }), LeaseBusyError);
    await assert.rejects(Lease.acquire(undefined, resource, { holder: 'worker-a', ttlMs: 5000 }), (err: unknown) => {
      assert.ok(err instanceof LeaseAlreadyHeldError);
      assert.equal(err.token, lease.token);
      return true;
    });
    assert.equal(lease.lost, false);
    assert.equal(lease.signal.aborted, false);
  } finally {
    assert.equal(await lease.release(), true);
  }
  assert.equal(await lease.release(), true, 'a second release returns the first answer');
  assert.deepEqual(await live(resource), []);
  assert.equal(lease.signal.aborted, false, 'release is not a loss');
  assert.throws(() => lease.check(), LeaseLostError);
});

test('the deadline counts from the start of the grant, on the monotonic clock', async () => {
  const before = performance.now();
  const lease = await Lease.acquire(undefined, unique('order'), { holder: 'worker-a', ttlMs: 4000 });
  const afterGrant = performance.now();
  try {
    assert.ok(lease.deadline >= before + 4000 && lease.deadline <= afterGrant + 4000);
    assert.ok(lease.remainingMs <= 4000 && lease.remainingMs > 3000);
  } finally {
    await lease.release();
  }
});

test('keepalive: renews at a third of the TTL on its own connection, through five TTLs', async () => {
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { holder: 'ka-holder', ttlMs: 600 });
  try {
    const first = lease.deadline;
    const { rows } = await db.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'fencing keepalive ka-holder'",
    );
    assert.equal(rows[0].n, 1);
    await sleep(3000);
    assert.equal(lease.lost, false);
    assert.ok(lease.deadline > first + 2000, 'the deadline moved with the renewals');
    assert.ok(lease.remainingMs > 300, `remaining ${lease.remainingMs} ms: renewed every third of the TTL`);
    assert.equal((await live(resource)).length, 1);
  } finally {
    await lease.release();
  }
});

test('a terminated keepalive connection is reconnected before the deadline', async () => {
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { holder: 'term-holder', ttlMs: 1500 });
  try {
    await sleep(100);
    const { rows } = await db.query(
      "SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity WHERE application_name = 'fencing keepalive term-holder'",
    );
    assert.equal(rows.length, 1);
    await sleep(2500);
    assert.equal(lease.lost, false);
    assert.equal((await live(resource)).length, 1);
  } finally {
    assert.equal(await lease.release(), true);
  }
});

test('a refused renewal aborts the signal with LeaseLostError', async () => {
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { holder: 'refused', ttlMs: 900 });
  try {
    const aborted = new Promise((resolve) => lease.signal.addEventListener('abort', () => resolve(lease.signal.reason)));
    await db.query("SELECT fencing.release($1, 'refused', $2)", [resource, lease.token.toString()]);
    const reason = await aborted;
    assert.ok(reason instanceof LeaseLostError);
    assert.match((reason as Error).message, /refused/);
    assert.throws(() => lease.check(), LeaseLostError);
  } finally {
    assert.equal(await lease.release(), false);
  }
});

test('a frozen process sees its lease lost the moment it thaws', async () => {
  const lease = await Lease.acquire(undefined, unique('order'), { holder: 'frozen', ttlMs: 600 });
  try {
    freeze(800); // no timer runs: no renewal, no deadline timer
    assert.equal(lease.lost, true);
    assert.equal(lease.signal.aborted, true);
    assert.ok(lease.remainingMs < 0);
    assert.throws(() => lease.check(), LeaseLostError);
  } finally {
    await lease.release();
  }
});

test('withLease releases when the body throws', async () => {
  const resource = unique('order');
  await assert.rejects(
    withLease(undefined, resource, { holder: 'scoped', ttlMs: 5000 }, async (lease) => {
      assert.equal((await live(resource)).length, 1);
      assert.ok(lease.token > 0n);
      throw new Error('inside');
    }),
    /inside/,
  );
  assert.deepEqual(await live(resource), []);
});

test('timers do not keep the process alive after release', () => {
  const script = `
    const { Lease } = require(${JSON.stringify(require.resolve('../src/index'))});
    (async () => {
      const lease = await Lease.acquire(undefined, 'exit-${process.pid}', { holder: 'exiting', ttlMs: 60000 });
      await lease.release();
      const t = process.hrtime.bigint(); process.on('exit', () => console.log('exit'));
    })();`;
  const started = Date.now();
  const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20000 });
  assert.equal(child.status, 0, child.stderr);
  assert.match(child.stdout, /exit/);
  assert.ok(Date.now() - started < 10000);
});

test('wait: granted when the holder releases, LeaseTimeout when the wait passes', async () => {
  const resource = unique('order');
  const first = await Lease.acquire(undefined, resource, { holder: 'first', ttlMs: 5000 });
  try {
    await assert.rejects(Lease.acquire(undefined, resource, { holder: 'second', ttlMs: 5000, waitMs: 300 }), LeaseTimeoutError);
    const waiting = Lease.acquire(undefined, resource, { holder: 'second', ttlMs: 5000, waitMs: 5000 });
    await sleep(300);
    await first.release();
    const second = await waiting;
    assert.ok(second.token > first.token);
    await second.release();
  } finally {
    await first.release();
  }
});

test('wait: a grant that came late in a long wait is renewed at once and starts with a full TTL', async () => {
  const resource = unique('order');
  const first = await Lease.acquire(undefined, resource, { holder: 'expiring', ttlMs: 900 });
  first._lose('the test stops renewing it'); // stop its keepalive: it expires on the server
  try {
    const started = performance.now();
    const second = await Lease.acquire(undefined, resource, { holder: 'late', ttlMs: 900, waitMs: 5000 });
    try {
      assert.ok(performance.now() - started >= 300, 'granted at the first holder\'s expiry');
      assert.ok(second.lastAcknowledged > started + 300, 'the deadline counts from the renewal after the grant');
      assert.ok(second.remainingMs > 600, `remaining ${second.remainingMs} ms`);
      assert.equal(second.lost, false);
    } finally {
      await second.release();
    }
  } finally {
    await first.release();
  }
});

test('a renewal that hangs is dropped and retried; one that hangs past the deadline loses the lease', async () => {
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { holder: 'hung', ttlMs: 1500 });
  const blocker = await connect();
  try {
    // A transaction holding the lease table's lock: every renewal waits for it
    // (a row lock would not hold it: a renewal kept in memory locks no row).
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE fencing.resources IN ACCESS EXCLUSIVE MODE');
    await sleep(900); // the renewal due at 500 ms waits, is dropped at a third of the TTL, retried
    await blocker.query('COMMIT');
    await sleep(800);
    assert.equal(lease.lost, false, 'renewed once the lock was gone');

    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE fencing.resources IN ACCESS EXCLUSIVE MODE');
    const lost = await new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), 4000);
      lease.signal.addEventListener('abort', () => {
        clearTimeout(timer);
        resolve(true);
      });
    });
    assert.equal(lost, true, 'lost at the deadline while the renewals hang');
    assert.ok(lease.remainingMs <= 0);
    await blocker.query('COMMIT');
  } finally {
    await blocker.end();
    await lease.release();
  }
});
