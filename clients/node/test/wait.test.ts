import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from 'pg';
import {
  Election,
  Lease,
  LeaseBusyError,
  LeaseLostError,
  LeaseTimeoutError,
  Session,
  WAIT_CHUNK_MS,
  withLease,
} from '../src/index';
import { connect, protectedTable, sleep, unique } from './helpers';

let db: Client;
before(async () => {
  db = await connect();
  await protectedTable(db, unique('wait_setup'));
});
after(async () => {
  await db.end();
});

/** Backends of `holder` waiting in a call of fencing.acquire() now. */
async function waiting(holder: string): Promise<number> {
  const { rows } = await db.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'active' AND query LIKE '%fencing.acquire%'",
    [`fencing keepalive ${holder}`],
  );
  return rows[0].n;
}

test('a busy try is LeaseBusyError, not a timeout; a wait that passed is LeaseTimeoutError', async () => {
  const resource = unique('order');
  const held = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
  try {
    for (const waitMs of [undefined, null, 0]) {
      await assert.rejects(Lease.acquire(undefined, resource, { ttlMs: 5000, waitMs }), (err: unknown) => {
        assert.ok(err instanceof LeaseBusyError, String(err));
        assert.ok(!(err instanceof LeaseTimeoutError));
        assert.match(err.message, /is held by another holder/);
        return true;
      });
    }
    const started = performance.now();
    await assert.rejects(Lease.acquire(undefined, resource, { ttlMs: 5000, waitMs: 300 }), (err: unknown) => {
      assert.ok(err instanceof LeaseTimeoutError, String(err));
      assert.equal(err.waitMs, 300);
      assert.match(err.message, /not granted within 300 ms/);
      return true;
    });
    assert.ok(performance.now() - started >= 290, 'it waited');
  } finally {
    await held.release();
  }
});

test('waitMs: Infinity waits until granted, in one server-side call of at most an hour', async () => {
  assert.equal(WAIT_CHUNK_MS, 3_600_000);
  const resource = unique('order');
  const held = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
  const holder = unique('forever');
  const next = Lease.acquire(undefined, resource, { holder, ttlMs: 5000, waitMs: Infinity });
  try {
    await sleep(700);
    assert.equal(await waiting(holder), 1, 'waiting on the server, not polling');
    const { rows } = await db.query('SELECT query FROM pg_stat_activity WHERE application_name = $1', [`fencing keepalive ${holder}`]);
    assert.match(rows[0].query, /fencing\.acquire\(\$1, \$2, .*, .*\)/);
    assert.equal(await held.release(), true);
    const lease = await next;
    assert.ok(lease.token > held.token);
    assert.equal(lease.holder, holder);
    assert.equal(await lease.release(), true);
  } finally {
    await held.release();
    await next.then((l) => l.release()).catch(() => false);
  }
});

test('an AbortSignal ends a wait: the server-side call is cancelled, nothing stays queued', async () => {
  const resource = unique('order');
  const held = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
  const holder = unique('cancelled');
  const controller = new AbortController();
  try {
    const wait = Lease.acquire(undefined, resource, { holder, ttlMs: 5000, waitMs: Infinity, signal: controller.signal });
    await sleep(500);
    assert.equal(await waiting(holder), 1);
    const reason = new Error('stop waiting');
    const aborted = performance.now();
    controller.abort(reason);
    await assert.rejects(wait, (err: unknown) => err === reason);
    assert.ok(performance.now() - aborted < 2000, 'ended at once');
    assert.equal(await waiting(holder), 0, 'no backend of it left in fencing.acquire()');
    // The holder's release grants no one: the cancelled waiter is out of the line.
    assert.equal(await held.release(), true);
    await sleep(200);
    const { rows } = await db.query('SELECT holder FROM fencing.leases WHERE resource = $1 AND live', [resource]);
    assert.deepEqual(rows, []);
    const after = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
    assert.equal(await after.release(), true);
  } finally {
    await held.release();
  }
});

test('a signal aborted before the call: its reason at once, nothing sent', async () => {
  const reason = new Error('already');
  // Port 1 refuses: a connection attempt would fail with ECONNREFUSED, not the reason.
  const nowhere = { host: '127.0.0.1', port: 1, connectionTimeoutMillis: 500 };
  await assert.rejects(
    Lease.acquire(nowhere, 'order:1', { ttlMs: 1000, waitMs: Infinity, signal: AbortSignal.abort(reason) }),
    (err: unknown) => err === reason,
  );
});

test('a session waits forever too, and its signal ends the wait', async () => {
  const resource = unique('order');
  const held = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
  const session = new Session(undefined);
  try {
    const controller = new AbortController();
    const wait = session.lease(resource, { ttlMs: 5000, waitMs: Infinity, signal: controller.signal });
    await sleep(300);
    controller.abort();
    await assert.rejects(wait, { name: 'AbortError' });
    const granted = session.lease(resource, { ttlMs: 5000, waitMs: Infinity });
    await sleep(300);
    await held.release();
    assert.equal((await granted).holder, session.holder);
  } finally {
    await held.release();
    await session.close();
  }
});

test('bad options are refused with TypeError / RangeError before anything is sent', async () => {
  const nowhere = { host: '127.0.0.1', port: 1, connectionTimeoutMillis: 500 };
  const bad: [Record<string, unknown>, typeof TypeError | typeof RangeError, RegExp][] = [
    [{ ttlMs: NaN }, RangeError, /ttlMs must be a positive finite number of milliseconds, not NaN/],
    [{ ttlMs: -1 }, RangeError, /ttlMs .* not -1/],
    [{ ttlMs: Infinity }, RangeError, /ttlMs .* not Infinity/],
    [{ ttlMs: '1000' }, TypeError, /ttlMs must be a number of milliseconds, not string/],
    [{ ttlMs: 1000, waitMs: NaN }, RangeError, /waitMs must be >= 0 milliseconds or Infinity, not NaN/],
    [{ ttlMs: 1000, waitMs: -5 }, RangeError, /not -5/],
    [{ ttlMs: 1000, waitMs: '5' }, TypeError, /waitMs must be a number/],
    [{ ttlMs: 1000, holder: 5 }, TypeError, /holder must be a non-empty string/],
    [{ ttlMs: 1000, holder: '' }, TypeError, /holder must be a non-empty string/],
    [{ ttlMs: 1000, signal: 'stop' }, TypeError, /signal must be an AbortSignal/],
    [{ ttlMs: 1000, logger: {} }, TypeError, /logger must have a warn/],
  ];
  for (const [opts, type, message] of bad) {
    await assert.rejects(Lease.acquire(nowhere, 'order:1', opts as never), (err: unknown) => {
      assert.ok(err instanceof type, `${JSON.stringify(opts)}: ${String(err)}`);
      assert.match((err as Error).message, message);
      return true;
    });
    await assert.rejects(withLease(nowhere, 'order:1', opts as never, async () => 1), type);
  }
  await assert.rejects(Lease.acquire(nowhere, '', { ttlMs: 1000 }), /resource must be a non-empty string/);
  await assert.rejects(Lease.acquire(nowhere, 7 as never, { ttlMs: 1000 }), TypeError);
  await assert.rejects(Lease.acquire(nowhere, 'order:1', null as never), TypeError);
  await assert.rejects(withLease(nowhere, 'order:1', { ttlMs: 1000 }, 'run' as never), /needs a function/);
  const session = new Session(nowhere);
  await assert.rejects(session.lease('order:1', { ttlMs: NaN }), RangeError);
  await assert.rejects(session.lease('order:1', { ttlMs: 1000, waitMs: -1 }), RangeError);
  await session.close();
  assert.throws(() => new Session(nowhere, { holder: 3 as never }), TypeError);
  assert.throws(() => new Election(nowhere, '', {}), /election must be a non-empty string/);
  assert.throws(() => new Election(nowhere, 'e', { ttlMs: NaN }), RangeError);
  assert.throws(() => new Election(nowhere, 'e', { ttlMs: '5' as never }), TypeError);
  assert.throws(() => new Election(nowhere, 'e', { recampaign: 'yes' as never }), /recampaign must be a boolean/);
  assert.throws(() => new Election(nowhere, 'e', { candidate: '' }), /candidate must be a non-empty string/);
  assert.throws(() => new Election(nowhere, 'e', { onNewLeader: 5 as never }), /onNewLeader must be a function/);
  const election = new Election(nowhere, 'e');
  assert.throws(() => election.campaign({ waitMs: -1 }), RangeError);
  assert.throws(() => election.campaign({ signal: {} as never }), TypeError);
});

test('withLease waits until granted, shows the loss signal, and ends with LeaseLostError after a loss', async () => {
  const resource = unique('order');
  const held = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
  const later = withLease(undefined, resource, { ttlMs: 900 }, async (lease) => {
    assert.equal(lease.signal.aborted, false);
    return lease.token;
  });
  await sleep(300);
  await held.release();
  const token = await later;
  assert.ok(token > held.token, 'waited (no waitMs: until granted), then ran');
  const { rows } = await db.query('SELECT count(*)::int AS n FROM fencing.leases WHERE resource = $1 AND live', [resource]);
  assert.equal(rows[0].n, 0, 'released at the end');

  let seen: unknown = null;
  await assert.rejects(
    withLease(undefined, resource, { ttlMs: 900, logger: { warn: () => {} } }, async (lease) => {
      await db.query('SELECT fencing.release($1, $2, $3)', [resource, lease.holder, lease.token.toString()]);
      await new Promise((resolve) => lease.signal.addEventListener('abort', resolve));
      seen = lease.signal.reason;
      return 'finished anyway';
    }),
    (err: unknown) => err instanceof LeaseLostError && err === seen,
  );
});
