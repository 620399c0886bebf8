import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Client } from 'pg';
import { Election, LeaseBusyError, LeaseLostError, StaleTokenError, fenced } from '../src/index';
import { connect, protectedTable, sleep, unique } from './helpers';

let db: Client;
let table: string;
before(async () => {
  db = await connect();
  table = unique('elected');
  await protectedTable(db, table);
});
after(async () => {
  await db.end();
});

const quiet = { warn: () => {} };

async function until(what: string, ok: () => boolean, timeoutMs: number): Promise<void> {
  const end = performance.now() + timeoutMs;
  while (!ok()) {
    if (performance.now() > end) throw new Error(`${what} not within ${timeoutMs} ms`);
    await sleep(10);
  }
}

test('one leader among three; fencing.leader() and leader() agree; its token fences its writes', async () => {
  const name = unique('election');
  const started: bigint[] = [];
  const candidates = [1, 2, 3].map(
    (i) => new Election(undefined, name, { candidate: `${name}-c${i}`, ttlMs: 3000, onStartedLeading: (t) => void started.push(t) }),
  );
  try {
    const first = await candidates[0]!.campaign();
    // c2 waits in line first, then c3 (each campaign's connection is its own: the order is the server's).
    const others = [candidates[1]!.campaign()];
    await sleep(300);
    others.push(candidates[2]!.campaign());
    await sleep(300);
    assert.deepEqual(candidates.map((c) => c.isLeader), [true, false, false]);
    assert.deepEqual(started, [first.token]);
    assert.equal(candidates[0]!.token, first.token);
    assert.equal(candidates[1]!.token, null);
    assert.equal(candidates[1]!.signal, null);
    assert.equal(candidates[0]!.signal, first.signal);
    const { rows } = await db.query('SELECT holder, token::text AS token FROM fencing.leader($1)', [name]);
    assert.deepEqual(rows, [{ holder: `${name}-c1`, token: first.token.toString() }]);
    const read = await candidates[2]!.leader();
    assert.equal(read?.holder, `${name}-c1`);
    assert.equal(read?.token, first.token);
    assert.ok(read?.expiresAt instanceof Date);
    await fenced(db, candidates[0]!, (c) => c.query(`UPDATE ${table} SET status = 'leader' WHERE id = 1`));
    await assert.rejects(
      fenced(db, candidates[1]!, (c) => c.query(`UPDATE ${table} SET status = 'not' WHERE id = 1`)),
      LeaseLostError,
    );
    // A try while someone leads: busy, not a wait.
    const tryer = new Election(undefined, name, { ttlMs: 3000 });
    await assert.rejects(tryer.campaign({ waitMs: 0 }), LeaseBusyError);
    await tryer.close();
    // Resign: the next in line (c2, who asked first) leads at once.
    const resigned = performance.now();
    assert.equal(await candidates[0]!.resign(), true);
    const second = await others[0]!;
    assert.ok(performance.now() - resigned < 1000);
    assert.ok(second.token > first.token);
    assert.equal(candidates[1]!.isLeader, true);
    assert.equal(candidates[2]!.isLeader, false);
    assert.equal(await candidates[0]!.resign(), false, 'not leading any more');
  } finally {
    for (const c of candidates) await c.close();
  }
  const { rows } = await db.query('SELECT count(*)::int AS n FROM fencing.leader($1)', [name]);
  assert.equal(rows[0].n, 0, 'close() resigned; the waiting campaign ended, granted to no one');
});

test('observe: every change in order, from LISTEN fencing_election, and a leader that expires without successor', async () => {
  const name = unique('election');
  const seen: [string | null, bigint | null][] = [];
  const observer = new Election(undefined, name, { onNewLeader: (h, t) => void seen.push([h, t]) });
  const a = new Election(undefined, name, { candidate: 'a', ttlMs: 1200, logger: quiet });
  const b = new Election(undefined, name, { candidate: 'b', ttlMs: 3000 });
  try {
    await observer.observe();
    assert.equal(seen.length, 0, 'no leader yet: nothing reported');
    const la = await a.campaign();
    await until('a seen', () => seen.length === 1, 1000);
    assert.deepEqual(seen, [['a', la.token]]);
    const waiting = b.campaign();
    await sleep(200);
    await a.resign();
    const lb = await waiting;
    await until('b seen', () => seen.some(([h]) => h === 'b'), 1000);
    assert.deepEqual(
      seen.filter(([h]) => h !== null),
      [
        ['a', la.token],
        ['b', lb.token],
      ],
    );
    // b's keepalive stops (a frozen leader, as far as the server knows): it expires, no one is notified.
    const lbDead = await db.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1', [
      'fencing keepalive b',
    ]);
    assert.equal(lbDead.rowCount, 1);
    await db.query('SELECT fencing.release($1, $2, $3)', [name, 'b', lb.token.toString()]); // no resign: no notification
    await until('none seen (the expiry timer re-read)', () => seen[seen.length - 1]![0] === null, 4000);
  } finally {
    await observer.close();
    await a.close();
    await b.close().catch(() => undefined);
  }
});

test('a leader that lost is told (onStoppedLeading) and with recampaign leads again; without, it does not', async () => {
  const name = unique('election');
  const events: string[] = [];
  const again = new Election(undefined, name, {
    candidate: 'again',
    ttlMs: 900,
    recampaign: true,
    logger: quiet,
    onStartedLeading: (t) => void events.push(`started ${t}`),
    onStoppedLeading: () => void events.push('stopped'),
  });
  const once = new Election(undefined, `${name}-once`, { candidate: 'once', ttlMs: 900, logger: quiet });
  try {
    const first = await again.campaign();
    const onceLease = await once.campaign();
    await db.query('SELECT fencing.release($1, $2, $3)', [name, 'again', first.token.toString()]);
    await db.query('SELECT fencing.release($1, $2, $3)', [`${name}-once`, 'once', onceLease.token.toString()]);
    await until('led again', () => events.length >= 3, 3000);
    assert.equal(events[0], `started ${first.token}`);
    assert.equal(events[1], 'stopped');
    assert.match(events[2]!, /^started \d+$/);
    assert.ok(again.token! > first.token);
    await until('once lost', () => !once.isLeader, 2000);
    await sleep(500);
    assert.equal(once.isLeader, false);
    const { rows } = await db.query('SELECT count(*)::int AS n FROM fencing.leader($1)', [`${name}-once`]);
    assert.equal(rows[0].n, 0, 'no recampaign without the option');
    // The old token is refused by the storage once the new leader wrote.
    await fenced(db, again, (c) => c.query(`UPDATE ${table} SET status = 'again' WHERE id = 1`));
    await assert.rejects(
      fenced(db, first.token, (c) => c.query(`UPDATE ${table} SET status = 'stale' WHERE id = 1`)),
      StaleTokenError,
    );
  } finally {
    await again.close();
    await once.close();
  }
});

test('a campaign waiting in line ends with its signal, the server-side call cancelled', async () => {
  const name = unique('election');
  const leader = new Election(undefined, name, { ttlMs: 3000 });
  const waiter = new Election(undefined, name, { ttlMs: 3000 });
  try {
    await leader.campaign();
    const controller = new AbortController();
    const waiting = waiter.campaign({ signal: controller.signal });
    await sleep(300);
    controller.abort(new Error('no more'));
    await assert.rejects(waiting, /no more/);
    const { rows } = await db.query(
      "SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state = 'active'",
      [`fencing keepalive ${waiter.candidate}`],
    );
    assert.equal(rows[0].n, 0);
    assert.equal(await leader.resign(), true);
    await sleep(200);
    assert.equal(waiter.isLeader, false);
    assert.equal((await db.query('SELECT count(*)::int AS n FROM fencing.leader($1)', [name])).rows[0].n, 0);
  } finally {
    await leader.close();
    await waiter.close();
  }
});
