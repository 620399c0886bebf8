import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from 'pg';
import { LeaseAlreadyHeldError, LeaseBusyError, LeaseLostError, Session } from '../src/index';
import { connect, protectedTable, sleep, unique } from './helpers';

let db: Client;
before(async () => {
  db = await connect();
  await protectedTable(db, unique('session_setup'));
});
after(async () => {
  await db.end();
});

async function liveCount(holder: string): Promise<number> {
  const { rows } = await db.query('SELECT count(*)::int AS n FROM fencing.leases WHERE holder = $1 AND live', [holder]);
  return rows[0].n;
}

test('a session keeps many leases alive on one connection through several TTLs', async () => {
  const holder = unique('sess');
  const session = new Session(undefined, { holder });
  try {
    const leases = await Promise.all([1, 2, 3].map((i) => session.lease(`${holder}:r${i}`, { ttlMs: 600 })));
    assert.equal(new Set(leases.map((l) => l.token)).size, 3);
    await sleep(2500);
    assert.equal(await liveCount(holder), 3);
    for (const lease of leases) assert.equal(lease.lost, false);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [
      `fencing keepalive ${holder}`,
    ]);
    assert.equal(rows[0].n, 1);
    await assert.rejects(session.lease(`${holder}:r1`, { ttlMs: 600 }), LeaseAlreadyHeldError);
    assert.equal(await leases[0]!.release(), true);
    assert.equal(await liveCount(holder), 2);
  } finally {
    assert.equal(await session.close(), true);
  }
  assert.equal(await liveCount(holder), 0);
});

test('a session loses only the lease whose renewal is refused', async () => {
  const holder = unique('sess');
  const session = new Session(undefined, { holder });
  try {
    const a = await session.lease(`${holder}:a`, { ttlMs: 900 });
    const b = await session.lease(`${holder}:b`, { ttlMs: 900 });
    await db.query('SELECT fencing.release($1, $2, $3)', [a.resource, holder, a.token.toString()]);
    await sleep(1200);
    assert.equal(a.lost, true);
    assert.ok(a.signal.reason instanceof LeaseLostError);
    assert.equal(b.lost, false);
    const other = new Session(undefined, { holder: 'other' });
    await assert.rejects(other.lease(b.resource, { ttlMs: 900 }), LeaseBusyError);
    assert.equal(await other.close(), true);
  } finally {
    assert.equal(await session.close(), false, 'one lease was lost');
  }
});

test('a session waits on a connection of its own, renewals go on meanwhile', async () => {
  const holder = unique('sess');
  const session = new Session(undefined, { holder });
  const other = new Session(undefined, { holder: `${holder}-other` });
  try {
    const kept = await session.lease(`${holder}:kept`, { ttlMs: 600 });
    const blocker = await other.lease(`${holder}:busy`, { ttlMs: 5000 });
    const waiting = session.lease(`${holder}:busy`, { ttlMs: 600, waitMs: 5000 });
    await sleep(1500); // more than two TTLs of `kept` while the wait blocks
    assert.equal(kept.lost, false);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1', [
      `fencing acquire ${holder}`,
    ]);
    assert.equal(rows[0].n, 1);
    await blocker.release();
    const granted = await waiting;
    assert.equal(granted.lost, false);
    assert.equal(session.leases.length, 2);
  } finally {
    await other.close();
    assert.equal(await session.close(), true);
  }
});
