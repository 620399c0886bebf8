import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, test } from 'node:test';
import type { Client } from 'pg';
import { Lease, Session, defaultHolder } from '../src/index';
import { holderOf } from '../src/identity';
import { connect, protectedTable, unique } from './helpers';

let db: Client;
before(async () => {
  db = await connect();
  await protectedTable(db, unique('identity_setup'));
});
after(async () => {
  await db.end();
});

test('the default holder is host:pid:random, at most 45 bytes, new at each call', () => {
  const a = defaultHolder();
  const b = defaultHolder();
  assert.match(a, new RegExp(`^[^]+:${process.pid}:[0-9a-f]{8}$`));
  assert.ok(Buffer.byteLength(a) <= 45, a);
  assert.ok(hostname().startsWith(a.slice(0, a.indexOf(':'))), `${a} starts with (a part of) ${hostname()}`);
  assert.notEqual(a, b);
});

test('a long host name is cut, by whole characters, to keep the holder within 45 bytes', () => {
  const h = holderOf('h'.repeat(100), 4194304, 'abcdef01');
  assert.equal(Buffer.byteLength(h), 45);
  assert.ok(h.endsWith(':4194304:abcdef01'));
  const multibyte = holderOf('é'.repeat(40), 12, '0123abcd');
  assert.ok(Buffer.byteLength(multibyte) <= 45);
  assert.match(multibyte, /^é+:12:0123abcd$/, 'no character cut in half');
  assert.equal(holderOf('db1', 7, 'deadbeef'), 'db1:7:deadbeef');
});

test('a lease and a session without a holder take the default identity, which the server shows', async () => {
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { ttlMs: 5000 });
  const session = new Session(undefined);
  try {
    assert.match(lease.holder, /:\d+:[0-9a-f]{8}$/);
    const { rows } = await db.query('SELECT holder FROM fencing.leases WHERE resource = $1 AND live', [resource]);
    assert.deepEqual(rows, [{ holder: lease.holder }]);
    const other = await session.lease(`${resource}:s`, { ttlMs: 5000 });
    assert.match(session.holder, /:\d+:[0-9a-f]{8}$/);
    assert.equal(other.holder, session.holder);
    assert.notEqual(session.holder, lease.holder, 'two identities of one process differ');
  } finally {
    assert.equal(await lease.release(), true);
    assert.equal(await session.close(), true);
  }
});
