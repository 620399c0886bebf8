import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { Lease, Session, fenced } from '../src/index';
import { connect, protectedTable, sleep, unique } from './helpers';

/** Restarts the server test/dev started (PGDATA, FENCING_SERVER_USER); false if it cannot. */
function restartServer(): boolean {
  const data = process.env.PGDATA;
  const user = process.env.FENCING_SERVER_USER;
  if (!data || !user) return false;
  const asUser = process.getuid?.() === 0 && user !== 'root' ? ['runuser', '-u', user, '--'] : [];
  const cmd = [...asUser, 'pg_ctl', '-D', data, '-w', '-m', 'fast', 'restart'];
  // From /: the server user may not enter the checkout (a private home directory).
  const r = spawnSync(cmd[0]!, cmd.slice(1), { cwd: '/', encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 0) throw new Error(`pg_ctl restart failed: ${r.stderr}`);
  return true;
}

test('a server restart: the keepalives reconnect and the leases survive', async (t) => {
  if (!process.env.PGDATA || !process.env.FENCING_SERVER_USER) return t.skip('needs PGDATA and FENCING_SERVER_USER (test/dev)');
  if (spawnSync('pg_ctl', ['--version']).status !== 0) return t.skip('needs pg_ctl on PATH (test/dev)');
  const setup = await connect();
  const table = unique('orders');
  await protectedTable(setup, table);
  await setup.end();
  const resource = unique('order');
  const lease = await Lease.acquire(undefined, resource, { holder: 'restart-a', ttlMs: 3000 });
  const session = new Session(undefined, { holder: 'restart-s' });
  try {
    const s = await session.lease(`${resource}:s`, { ttlMs: 3000 });
    assert.ok(restartServer());
    await sleep(3500);
    assert.equal(lease.lost, false, 'the lease survived the restart');
    assert.equal(s.lost, false, 'the session lease survived the restart');
    const db = await connect();
    try {
      const { rows } = await db.query('SELECT resource FROM fencing.leases WHERE live AND resource LIKE $1 ORDER BY 1', [`${resource}%`]);
      assert.deepEqual(rows.map((r) => r.resource), [resource, `${resource}:s`]);
      await fenced(db, lease, (c) => c.query(`UPDATE ${table} SET status = 'after restart' WHERE id = 1`));
    } finally {
      await db.end();
    }
  } finally {
    assert.equal(await lease.release(), true);
    assert.equal(await session.close(), true);
  }
});
