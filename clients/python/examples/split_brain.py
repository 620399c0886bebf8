"""The GC-pause split brain of docs/design.md, replayed with real worker
processes through the Python client (test/replay --client python):

  t=0   worker A takes the lease on order:101 (TTL 10 s) and starts its write
  t=2   A is frozen (SIGSTOP: its keepalive thread too)
  t=10  A's lease expires
  t=13  worker B takes the lease and writes: accepted
  t=14  A thaws: its lease is lost the moment it thaws, so its fenced write
        raises LeaseLost without reaching the server; its raw token, written
        anyway, is refused by the storage (StaleTokenError, dead-lettered)

    python3 split_brain.py [--scale MS]    (MS milliseconds per schedule second, default 300)

PGHOST, PGPORT, PGUSER and PGDATABASE name a database with the fencing
extension.  Exits 0 if the storage kept B's write and refused A's."""

import argparse
import os
import signal
import subprocess
import sys
import time

import psycopg

import fencing

RESOURCE = "order:101"
TABLE = "replay_orders"


def event(start, who, text):
    print(f"t={(time.time() - start) / SCALE:5.1f}  {who:8} {text}", flush=True)


def until(start, t):
    time.sleep(max(0.0, start + t * SCALE - time.time()))


def worker_a(ready_fd):
    dead_letters = []
    with psycopg.connect(autocommit=True) as conn, \
            fencing.Lease("", RESOURCE, ttl=10 * SCALE, wait=10 * SCALE) as lease:
        start = time.time()      # t=0: the grant (the schedule's clock starts here)
        os.write(ready_fd, repr(start).encode())
        os.close(ready_fd)
        event(start, "A", f"acquires the lease on {RESOURCE} (TTL 10 s): token {lease.token}")
        event(start, "A", "starts its write; its keepalive renews every 3.3 s")
        until(start, 3)          # the work: A is frozen at t=2, in the middle of it
        event(start, "A", f"thawed: its lease is {'lost' if lease.lost.is_set() else 'believed held'}")
        try:
            with fencing.fenced(conn, lease) as cur:
                cur.execute(f"UPDATE {TABLE} SET status = 'cancelled by A' WHERE id = %s", (RESOURCE,))
            event(start, "A", "fenced write ACCEPTED")
        except fencing.LeaseLost:
            event(start, "A", "fenced write: LeaseLost, nothing sent")
        try:       # a worker that does not check: its raw token reaches the storage
            with fencing.fenced(conn, lease.token, on_stale=dead_letters.append) as cur:
                cur.execute(f"UPDATE {TABLE} SET status = 'cancelled by A' WHERE id = %s", (RESOURCE,))
            event(start, "storage", f"token {lease.token} ACCEPTED")
        except fencing.StaleTokenError as e:
            event(start, "storage", f"token {e.presented} rejected (stored {e.stored}); "
                                    f"dead letters: {len(dead_letters)}")
    return 0


def worker_b(start):
    with psycopg.connect(autocommit=True) as conn, \
            fencing.Lease("", RESOURCE, ttl=10 * SCALE, wait=5 * SCALE) as lease:
        event(start, "B", f"acquires the lease on {RESOURCE}: token {lease.token}")
        with fencing.fenced(conn, lease) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'paid by B' WHERE id = %s", (RESOURCE,))
        event(start, "B", f"writes status=paid with token {lease.token}: accepted")
    return 0


def spawn(role, value, **options):
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), "--scale", str(int(SCALE * 1000)),
                             "--worker", role, "--start", repr(value)], **options)


def orchestrate():
    with psycopg.connect(autocommit=True) as conn:
        conn.execute("SET client_min_messages = warning")
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(f"CREATE TABLE {TABLE} (id text PRIMARY KEY, status text, "
                     "last_fencing_token bigint NOT NULL DEFAULT 0)")
        conn.execute("SELECT fencing.protect(%s)", (TABLE,))
        with fencing.fenced(conn, 1) as cur:
            cur.execute(f"INSERT INTO {TABLE} VALUES (%s, 'new')", (RESOURCE,))
        print(f"\nGC-pause split-brain on {RESOURCE}, real worker processes through the Python "
              f"client (1 s of schedule = {SCALE * 1000:.0f} ms)\n", flush=True)
        ready, ready_fd = os.pipe()
        a = spawn("a", ready_fd, pass_fds=(ready_fd,))
        os.close(ready_fd)
        with os.fdopen(ready, "rb") as pipe:
            start = float(pipe.read() or "nan")     # when A got its lease
        until(start, 2)
        a.send_signal(signal.SIGSTOP)
        event(start, "chaos", f"SIGSTOP worker A (pid {a.pid}): a stop-the-world pause, keepalive included")
        until(start, 11)
        event(start, "lease", "A's lease expired at t=10; A knows nothing")
        until(start, 13)
        b = spawn("b", start)
        b.wait(timeout=60)
        until(start, 14)
        event(start, "chaos", "SIGCONT worker A")
        a.send_signal(signal.SIGCONT)
        a.wait(timeout=60)
        status, token = conn.execute(f"SELECT status, last_fencing_token FROM {TABLE} WHERE id = %s",
                                     (RESOURCE,)).fetchone()
        print(f"\n{RESOURCE} now: {status}, token {token}")
        ok = status == "paid by B" and a.returncode == 0 and b.returncode == 0
        print("split brain prevented: the stale write was refused" if ok
              else "FAILED: the stale write was not refused")
        return 0 if ok else 1


def main():
    global SCALE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=300, help="milliseconds per schedule second")
    parser.add_argument("--worker", choices=("a", "b"), help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    SCALE = args.scale / 1000
    if args.worker:
        return worker_a(int(args.start)) if args.worker == "a" else worker_b(args.start)
    return orchestrate()


SCALE = 0.3
if __name__ == "__main__":
    sys.exit(main())
