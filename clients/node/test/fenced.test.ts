import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Pool, type Client } from 'pg';
import {
  FencingError,
  Lease,
  LeaseLostError,
  MissingTokenError,
  StaleTokenError,
  fenced,
  staleRefusalCount,
  type Queryable,
} from '../src/index';
import { connect, freeze, protectedTable, unique } from './helpers';

let db: Client;
let work: Client;
let table: string;
before(async () => {
  db = await connect();
  work = await connect();
  work.on('error', () => {}); // a lease's transaction frozen past its deadline: the server ends the session
  table = unique('orders');
  await protectedTable(db, table);
});
after(async () => {
  await work.end();
  await db.end();
});

async function row(): Promise<{ status: string; token: string }> {
  const { rows } = await db.query(`SELECT status, last_fencing_token::text AS token FROM ${table} WHERE id = 1`);
  return rows[0];
}

/** A client that counts what it sends. */
function counting(client: Client): Queryable & { sent: string[] } {
  const sent: string[] = [];
  return {
    sent,
    query: ((text: string, values?: unknown[]) => {
      sent.push(text);
      return client.query(text, values);
    }) as Queryable['query'],
  };
}

test('a fenced write with a lease commits with SET LOCAL fencing.token', async () => {
  const lease = await Lease.acquire(undefined, unique('order'), { holder: 'writer', ttlMs: 5000 });
  try {
    const n = await fenced(work, lease, async (c) => (await c.query(`UPDATE ${table} SET status = 'paid' WHERE id = 1`)).rowCount);
    assert.equal(n, 1);
    assert.deepEqual(await row(), { status: 'paid', token: lease.token.toString() });
    const { rows } = await work.query("SELECT current_setting('fencing.token', true) AS t");
    assert.ok(!rows[0].t, 'the token did not outlive the transaction');
  } finally {
    await lease.release();
  }
});

test('a stale token: StaleTokenError with its fields, the hook, the counter, the rollback', async () => {
  const stored = BigInt((await row()).token);
  const before = staleRefusalCount();
  const seen: StaleTokenError[] = [];
  await assert.rejects(
    fenced(work, 1n, (c) => c.query(`UPDATE ${table} SET status = 'late' WHERE id = 1`), {
      onStale: async (err) => {
        seen.push(err);
      },
    }),
    (err: unknown) => {
      assert.ok(err instanceof StaleTokenError);
      assert.equal(err.code, '23T01');
      assert.equal(err.table, table);
      assert.equal(err.column, 'last_fencing_token');
      assert.equal(err.constraint, 'fencing_stale_token');
      assert.equal(err.key, '(id)=(1)');
      assert.equal(err.presented, 1n);
      assert.equal(err.stored, stored);
      return true;
    },
  );
  assert.equal(seen.length, 1);
  assert.equal(staleRefusalCount(), before + 1);
  assert.equal((await row()).status, 'paid');
  const { rows } = await work.query('SELECT 1 AS one');
  assert.equal(rows[0].one, 1, 'the connection is usable after the refusal');
});

test('no token: MissingTokenError', async () => {
  await assert.rejects(fenced(work, null, (c) => c.query(`UPDATE ${table} SET status = 'x' WHERE id = 1`)), (err: unknown) => {
    assert.ok(err instanceof MissingTokenError);
    assert.equal(err.constraint, 'fencing_missing_token');
    assert.equal(err.presented, null);
    return true;
  });
});

test('tokens above 2^53 stay exact (bigint)', async () => {
  const big = 2n ** 60n + 1n;
  await fenced(work, big, (c) => c.query(`UPDATE ${table} SET status = 'big' WHERE id = 1`));
  assert.equal((await row()).token, big.toString());
  await assert.rejects(fenced(work, big - 2n, (c) => c.query(`UPDATE ${table} SET status = 'x' WHERE id = 1`)), (err: unknown) => {
    assert.ok(err instanceof StaleTokenError);
    assert.equal(err.presented, big - 2n);
    assert.equal(err.stored, big);
    return true;
  });
});

test('a lost lease: LeaseLostError on entry without sending anything', async () => {
  const lease = await Lease.acquire(undefined, unique('order'), { holder: 'lost-entry', ttlMs: 400 });
  try {
    freeze(600);
    const c = counting(work);
    await assert.rejects(fenced(c, lease, (q) => q.query('SELECT 1')), LeaseLostError);
    assert.deepEqual(c.sent, []);
  } finally {
    await lease.release();
  }
});

test('the deadline passes during the transaction: no COMMIT, rolled back', async () => {
  const t2 = unique('orders');
  await protectedTable(db, t2);
  const lease = await Lease.acquire(undefined, unique('order'), { holder: 'lost-commit', ttlMs: 500 });
  try {
    const c = counting(work);
    await assert.rejects(
      fenced(c, lease, async (q) => {
        await q.query(`UPDATE ${t2} SET status = 'too late' WHERE id = 1`);
        freeze(700);
      }),
      LeaseLostError,
    );
    assert.ok(!c.sent.includes('COMMIT'));
    assert.ok(c.sent.includes('ROLLBACK'));
    const { rows } = await db.query(`SELECT status FROM ${t2} WHERE id = 1`);
    assert.equal(rows[0].status, 'new');
  } finally {
    await lease.release();
  }
});

test('an error inside rolls back and is rethrown; a Pool works too', async () => {
  const t3 = unique('orders');
  await protectedTable(db, t3);
  const pool = new Pool({ max: 1 });
  try {
    const lease = await Lease.acquire(undefined, unique('order'), { holder: 'pool', ttlMs: 5000 });
    try {
      await assert.rejects(
        fenced(pool, lease, async (c) => {
          await c.query(`UPDATE ${t3} SET status = 'half' WHERE id = 1`);
          throw new Error('boom');
        }),
        /boom/,
      );
      const { rows } = await db.query(`SELECT status FROM ${t3} WHERE id = 1`);
      assert.equal(rows[0].status, 'new');
      assert.equal(await fenced(pool, lease, async (c) => (await c.query(`UPDATE ${t3} SET status = 'p' WHERE id = 1`)).rowCount), 1);
      await assert.rejects(fenced(pool, 1, (c) => c.query(`UPDATE ${t3} SET status = 'q' WHERE id = 1`)), StaleTokenError);
      assert.equal(pool.idleCount, 1, 'the client went back to the pool');
    } finally {
      await lease.release();
    }
  } finally {
    await pool.end();
  }
});

test("a connection already in a transaction: FencingError, nothing sent, the caller's transaction left open", async () => {
  const c = await connect();
  try {
    await c.query(`CREATE TEMP TABLE callers_work (v text)`);
    await c.query('BEGIN');
    await c.query(`INSERT INTO callers_work VALUES ('not to be committed by fenced()')`);
    const before = await row();
    await assert.rejects(
      fenced(c, 1_000_000n, (cl) => cl.query(`UPDATE ${table} SET status = 'in-open-tx' WHERE id = 1`)),
      (err: Error) => err instanceof FencingError && /own transaction/.test(err.message),
    );
    assert.equal(c.getTransactionStatus(), 'T', "the caller's transaction is still open");
    await c.query('ROLLBACK');
    const { rows } = await c.query('SELECT count(*)::int AS n FROM callers_work');
    assert.equal(rows[0].n, 0, "fenced() did not commit the caller's work");
    assert.deepEqual(await row(), before);
  } finally {
    await c.end();
  }
});

test("a lease's transaction is bounded by its remaining time (SET LOCAL); a plain token's is not", async () => {
  const lease = await Lease.acquire(undefined, unique('order'), { ttlMs: 5000 });
  const work = await connect();
  try {
    const { rows } = await db.query("SELECT current_setting('server_version_num')::int AS v");
    const seventeen = rows[0].v >= 170000;
    const settings = await fenced(work, lease, async (c) => {
      const idle = await c.query("SELECT current_setting('idle_in_transaction_session_timeout') AS v");
      const total = seventeen ? await c.query("SELECT current_setting('transaction_timeout') AS v") : null;
      return { idle: idle.rows[0].v as string, total: total?.rows[0].v as string | undefined };
    });
    const ms = (v: string) => (v.endsWith('ms') ? Number(v.slice(0, -2)) : Number(v.slice(0, -1)) * 1000);
    assert.ok(ms(settings.idle) > 3000 && ms(settings.idle) <= 5000, settings.idle);
    if (seventeen) assert.equal(settings.total, settings.idle);
    const after = await work.query("SELECT current_setting('idle_in_transaction_session_timeout') AS v");
    assert.equal(after.rows[0].v, '0', 'SET LOCAL: gone after the COMMIT');
    const plain = await fenced(work, 7n, async (c) => (await c.query("SELECT current_setting('idle_in_transaction_session_timeout') AS v")).rows[0].v);
    assert.equal(plain, '0', 'a plain token has no deadline: nothing set');
  } finally {
    await lease.release();
    await work.end();
  }
});

test('a lease of 366 days: no renewal before its third, a fenced bound at the largest timeout the server takes', async () => {
  // 366 days is 31622400000 ms: past INT_MAX, the largest timeout of Node's timers and of the server's settings.
  const overflows: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === 'TimeoutOverflowWarning') overflows.push(w.message);
  };
  process.on('warning', onWarning);
  const lease = await Lease.acquire(undefined, unique('long'), { ttlMs: 366 * 86_400_000 });
  const own = await connect();
  try {
    const acknowledged = lease.lastAcknowledged;
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(lease.lastAcknowledged, acknowledged, 'renewed at once: the renewal timer overflowed');
    assert.equal(lease.lost, false);
    const idle = await fenced(own, lease, async (c) =>
      (await c.query("SELECT setting FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'")).rows[0].setting);
    assert.equal(idle, '2147483647');
  } finally {
    await lease.release();
    await own.end();
    process.off('warning', onWarning);
  }
  assert.deepEqual(overflows, [], 'a timer of more than INT_MAX ms fires at once');
});

test('a holder frozen inside its transaction is ended by the server at its deadline: the next write goes through', async () => {
  const resource = unique('order');
  const own = unique('orders');
  await protectedTable(db, own);
  const frozen = await connect();
  // No 'error' listener of ours: fenced() keeps the server's ending of the session from crashing the process.
  const lease = await Lease.acquire(undefined, resource, { ttlMs: 1000, logger: { warn: () => {} } });
  const started = performance.now();
  const write = fenced(frozen, lease, async (c) => {
    await c.query(`UPDATE ${own} SET status = 'frozen' WHERE id = 1`);
    // Frozen, as far as the server knows: no renewal, idle in transaction, holding the row lock.
    await db.query('SELECT fencing.release($1, $2, $3)', [resource, lease.holder, lease.token.toString()]);
    await new Promise((resolve) => setTimeout(resolve, 4000));
  });
  const outcome = write.then(
    () => null,
    (err: unknown) => err,
  );
  try {
    await new Promise((resolve) => setTimeout(resolve, 200));
    const next = await Lease.acquire(undefined, resource, { ttlMs: 5000, waitMs: 5000 }); // granted at once: released
    try {
      await fenced(db, next, (c) => c.query(`UPDATE ${own} SET status = 'next' WHERE id = 1`));
      const waited = performance.now() - started;
      assert.ok(waited < 1000 + 1500, `the row lock ended with the lease (${Math.round(waited)} ms)`);
      const { rows } = await db.query(`SELECT status, last_fencing_token::text AS token FROM ${own} WHERE id = 1`);
      assert.deepEqual(rows[0], { status: 'next', token: next.token.toString() });
    } finally {
      await next.release();
    }
    const pid = (frozen as unknown as { processID: number }).processID;
    const { rows } = await db.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid]);
    assert.equal(rows[0].n, 0, 'the server ended the frozen session');
    const err = await outcome;
    assert.ok(err instanceof LeaseLostError, String(err));
  } finally {
    await lease.release().catch(() => false);
    await frozen.end().catch(() => {});
  }
});
