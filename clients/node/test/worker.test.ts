import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import type { Client } from 'pg';
import { connect, protectedTable, sleep, unique } from './helpers';

/** The conformance worker (clients/node/conformance-worker) as a child process. */
class Worker {
  readonly child: ChildProcessWithoutNullStreams;
  readonly #answers: string[] = [];
  readonly #waiting: ((line: string) => void)[] = [];
  stderr = '';

  constructor() {
    this.child = spawn(join(__dirname, '..', '..', 'conformance-worker'), [], { stdio: 'pipe' });
    this.child.stderr.on('data', (d) => (this.stderr += d));
    createInterface({ input: this.child.stdout }).on('line', (line) => {
      const waiter = this.#waiting.shift();
      if (waiter) waiter(line);
      else this.#answers.push(line);
    });
  }

  /** Sends a request and returns its answer, raw (tokens may exceed 2^53) and parsed. */
  async ask(request: Record<string, unknown> | string): Promise<Record<string, any> & { raw: string }> {
    this.child.stdin.write((typeof request === 'string' ? request : JSON.stringify(request)) + '\n');
    const line = this.#answers.shift() ?? (await new Promise<string>((resolve) => this.#waiting.push(resolve)));
    return { ...JSON.parse(line), raw: line };
  }

  exited(): Promise<number | null> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null) resolve(this.child.exitCode);
      else this.child.on('exit', (code) => resolve(code));
    });
  }
}

let db: Client;
let table: string;
before(async () => {
  db = await connect();
  table = unique('orders');
  await protectedTable(db, table);
});
after(async () => {
  await db.end();
});

test('worker: grant, write, stale, missing, frozen past the TTL, quit releases', async () => {
  const w = new Worker();
  const resource = unique('order');
  const update = (status: string) => `UPDATE ${table} SET status = '${status}' WHERE id = 1`;
  try {
    const granted = await w.ask({ op: 'lease', resource, holder: 'w1', ttl: 1, wait: null });
    assert.equal(granted.ok, true, granted.raw);
    assert.match(granted.raw, /"token":\d+/);
    assert.deepEqual(await w.ask({ op: 'write', resource, sql: update('paid') }), { ok: true, rows: 1, raw: '{"ok":true,"rows":1}' });
    const busy = await w.ask({ op: 'lease', resource, holder: 'w2', ttl: 1, wait: null });
    assert.equal(busy.error, 'LeaseBusy');
    assert.equal((await w.ask({ op: 'lease', resource, holder: 'w1', ttl: 1, wait: null })).error, 'LeaseAlreadyHeld');

    const missing = await w.ask({ op: 'write', sql: update('x') });
    assert.equal(missing.error, 'MissingToken');
    assert.equal(missing.constraint, 'fencing_missing_token');
    assert.equal(missing.presented, null);

    // Frozen past the TTL; meanwhile another holder takes the lease and writes.
    w.child.kill('SIGSTOP');
    await sleep(1600);
    const { rows } = await db.query("SELECT fencing.acquire($1, 'w9', '10 s')::text AS token", [resource]);
    const newer = rows[0].token as string;
    assert.ok(newer);
    await db.query('BEGIN');
    await db.query("SELECT set_config('fencing.token', $1, true)", [newer]);
    await db.query(update('newer'));
    await db.query('COMMIT');
    w.child.kill('SIGCONT');

    const status = await w.ask({ op: 'status', resource });
    assert.equal(status.lost, true, status.raw);
    assert.ok(status.remaining < 0);
    assert.deepEqual((await w.ask({ op: 'await_lost', resource, timeout: 0.1 })).lost, true);
    const refused = await w.ask({ op: 'write', resource, sql: update('stale') });
    assert.equal(refused.error, 'LeaseLost', refused.raw);
    const token = granted.raw.match(/"token":(\d+)/)![1]!;
    const stale = await w.ask(`{"op":"write","token":${token},"sql":${JSON.stringify(update('stale'))}}`);
    assert.equal(stale.error, 'StaleToken', stale.raw);
    assert.equal(stale.presented.toString(), token);
    assert.deepEqual(await w.ask({ op: 'quit' }), { ok: true, raw: '{"ok":true}' });
    assert.equal(await w.exited(), 0, w.stderr);
  } finally {
    w.child.kill('SIGCONT');
  }
});

test('worker: the raw token after a newer write is StaleToken, counted with its callback; sessions; raise_inside; EOF', async () => {
  const w = new Worker();
  const resource = unique('order');
  const update = `UPDATE ${table} SET status = 'late' WHERE id = 1`;
  const big = '9007199254740993';
  const stale = await w.ask({ op: 'write', token: 1, sql: update });
  assert.equal(stale.error, 'StaleToken', stale.raw);
  assert.equal(stale.table, table);
  assert.equal(stale.column, 'last_fencing_token');
  assert.equal(stale.constraint, 'fencing_stale_token');
  assert.equal(stale.key, '(id)=(1)');
  assert.equal(stale.presented, 1);
  assert.ok(stale.stored > 1);
  // A token above 2^53 travels exactly both ways.
  assert.deepEqual(await w.ask(`{"op":"write","token":${big},"sql":${JSON.stringify(update)}}`), {
    ok: true,
    rows: 1,
    raw: '{"ok":true,"rows":1}',
  });
  const again = await w.ask({ op: 'write', token: 5, sql: update });
  assert.match(again.raw, new RegExp(`"stored":${big}`));
  assert.deepEqual(await w.ask({ op: 'stale_count' }), { ok: true, count: 2, callbacks: 2, raw: '{"ok":true,"count":2,"callbacks":2}' });

  const session = await w.ask({ op: 'session', holder: 's1', ttl: 0.6, resources: [`${resource}:a`, `${resource}:b`] });
  assert.equal(session.tokens.length, 2, session.raw);
  await sleep(1500);
  const status = await w.ask({ op: 'status', resource: `${resource}:b` });
  assert.equal(status.lost, false, status.raw);
  const { rows } = await db.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'fencing keepalive s1'");
  assert.equal(rows[0].n, 1);
  assert.deepEqual(await w.ask({ op: 'release', resource: `${resource}:a` }), { ok: true, released: true, raw: '{"ok":true,"released":true}' });
  const held = await db.query('SELECT count(*)::int AS n FROM fencing.leases WHERE holder = $1 AND live', ['s1']);
  assert.equal(held.rows[0].n, 0, 'the session released every lease');

  const raised = await w.ask({ op: 'raise_inside', resource: `${resource}:c`, holder: 'w1', ttl: 5 });
  assert.equal(raised.ok, true, raised.raw);
  const after = await db.query('SELECT count(*)::int AS n FROM fencing.leases WHERE resource = $1 AND live', [`${resource}:c`]);
  assert.equal(after.rows[0].n, 0);

  assert.equal((await w.ask({ op: 'lease', resource: `${resource}:d`, holder: 'w1', ttl: 5, wait: null })).ok, true);
  w.child.stdin.end();
  assert.equal(await w.exited(), 0, w.stderr);
  const eof = await db.query('SELECT count(*)::int AS n FROM fencing.leases WHERE resource = $1 AND live', [`${resource}:d`]);
  assert.equal(eof.rows[0].n, 0, 'released at EOF');
});

test('worker: default holder, a wait forever cancelled, do, an election (campaign, status, observe, events, resign)', async () => {
  const w = new Worker();
  const other = new Worker();
  const resource = unique('order');
  const election = unique('election');
  const own = unique('orders');
  await protectedTable(db, own);
  try {
    const held = await w.ask({ op: 'lease', resource, holder: null, ttl: 5, wait: null });
    assert.equal(held.ok, true, held.raw);
    assert.match(held.holder, /:\d+:[0-9a-f]{8}$/);
    assert.deepEqual(await other.ask({ op: 'lease_async', resource, holder: null, ttl: 5, wait: 'forever' }), { ok: true, raw: '{"ok":true}' });
    const pending = await other.ask({ op: 'await_lease', resource, timeout: 0.3 });
    assert.equal(pending.message, 'pending', pending.raw);
    assert.equal((await other.ask({ op: 'cancel', resource })).cancelled, true);
    const { rows } = await db.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%fencing.acquire%' AND pid <> pg_backend_pid()",
    );
    assert.equal(rows[0].n, 0, 'nothing left waiting');
    assert.equal((await w.ask({ op: 'release', resource })).released, true);
    const done = await other.ask({ op: 'do', resource, holder: null, ttl: 5, sql: `UPDATE ${own} SET status = 'done' WHERE id = 1`, hold: 0.1 });
    assert.equal(done.ok, true, done.raw);
    assert.equal(done.rows, 1);

    const campaign = await w.ask({ op: 'campaign', election, candidate: null, ttl: 3, recampaign: false });
    assert.match(campaign.candidate, /:\d+:[0-9a-f]{8}$/);
    assert.deepEqual(await other.ask({ op: 'observe', election }), { ok: true, raw: '{"ok":true}' });
    const led = await w.ask({ op: 'await_leader', election, timeout: 3 });
    assert.equal(led.leader, true, led.raw);
    const current = await other.ask({ op: 'current_leader', election });
    assert.equal(current.holder, campaign.candidate);
    assert.match(current.raw, new RegExp(`"token":${led.raw.match(/"token":(\d+)/)![1]}`));
    assert.equal((await w.ask({ op: 'write', election, sql: `UPDATE ${own} SET status = 'led' WHERE id = 1` })).rows, 1);
    assert.equal((await w.ask({ op: 'resign', election })).resigned, true);
    await sleep(300);
    const seen = await other.ask({ op: 'events', election });
    assert.deepEqual(
      seen.events.map((e: { kind: string; holder: string | null }) => [e.kind, e.holder]),
      [
        ['new_leader', campaign.candidate],
        ['new_leader', null],
      ],
      seen.raw,
    );
    const mine = await w.ask({ op: 'events', election });
    assert.deepEqual(mine.events.map((e: { kind: string }) => e.kind), ['started', 'stopped'], mine.raw);
    assert.equal((await w.ask({ op: 'write', election, sql: 'SELECT 1' })).error, 'LeaseLost');
  } finally {
    await w.ask({ op: 'quit' });
    await other.ask({ op: 'quit' });
  }
});
