"""Section 12 of test/bench/run: protect() on a live table.

A table of --rows rows (10,000,000) without a token column; --writers
sessions update random rows, one transaction each presenting a token
(SET LOCAL fencing.token through set_config), as fast as they can.  Windows,
the writers' latency measured for the transactions that start inside each:
  baseline           - nothing else, --baseline-seconds;
  protect (adds col) - fencing.protect(table, enforce => false) in a
                       transaction that then reads the locks it holds on the
                       table from pg_locks, and commits; the window runs from
                       the call until --after-seconds after the commit, so it
                       holds the transactions that queued behind the lock;
  unprotect          - fencing.unprotect(table), the same way;
  protect (col kept) - protect() again, the column being there now.
Prints one line per window (with the call's time and the locks it took) and
writes CSV to --csv.
"""
import argparse
import time

import psycopg

from compaction import Writers, percentile

TOKEN = 1000


def write(conn, rng, index):
    with conn.transaction():
        conn.execute("SELECT set_config('fencing.token', %s, true)", (str(TOKEN),))
        conn.execute("UPDATE live.t SET v = v + 1 WHERE id = %s", (rng.randint(1, ROWS),))


def call(dsn, sql):
    """Runs sql in a transaction; returns its time (ms), the locks it held on live.t, the commit's time."""
    with psycopg.connect(dsn) as conn:
        start = time.monotonic()
        conn.execute(sql)
        called = time.monotonic()
        locks = conn.execute(
            "SELECT string_agg(mode, '+' ORDER BY mode) FROM pg_locks"
            " WHERE pid = pg_backend_pid() AND granted AND relation = 'live.t'::regclass").fetchone()[0]
        conn.commit()
        return (called - start) * 1000, locks, time.monotonic()


def window(w, label, t0, t1, detail, csv):
    ms = [x * 1000 for x in w.window(t0, t1)]
    if not ms or w.errors:
        raise SystemExit(f"protect bench: no transaction started during {label}, or a writer failed: "
                         f"{w.errors[:1]}")
    row = dict(window=label, seconds=t1 - t0, transactions=len(ms), tps=len(ms) / (t1 - t0),
               p50=percentile(ms, 0.5), p99=percentile(ms, 0.99), max=max(ms), detail=detail)
    print(f"   {label:<22} {row['seconds']:6.1f} s {row['transactions']:7d} {row['tps']:7.0f}/s "
          f"p50 {row['p50']:6.2f}  p99 {row['p99']:7.2f}  max {row['max']:8.1f} ms  {detail}", flush=True)
    csv.write(",".join(str(row[k]) for k in ("window", "detail", "seconds", "transactions", "tps", "p50",
                                             "p99", "max")) + "\n")


def main():
    global ROWS
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--baseline-seconds", type=float, default=10)
    ap.add_argument("--after-seconds", type=float, default=2)
    ap.add_argument("--csv", required=True)
    args = ap.parse_args()
    ROWS = args.rows
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
        conn.execute("DROP SCHEMA IF EXISTS live CASCADE")
        conn.execute("CREATE SCHEMA live")
        conn.execute("CREATE TABLE live.t (id int PRIMARY KEY, v int NOT NULL)")
        start = time.monotonic()
        conn.execute("INSERT INTO live.t SELECT g, 0 FROM generate_series(1, %s) g", (ROWS,))
        conn.execute("VACUUM ANALYZE live.t")
        size = conn.execute("SELECT pg_size_pretty(pg_total_relation_size('live.t'))").fetchone()[0]
        print(f"   {ROWS} rows ({size}) loaded in {time.monotonic() - start:.0f} s", flush=True)
    with open(args.csv, "w") as csv:
        csv.write("window,detail,seconds,transactions,tps,p50,p99,max\n")
        windows = []  # (label, t0, t1, detail): the writers' samples are theirs once they stopped
        with Writers(args.dsn, args.writers, write) as w:
            t0 = time.monotonic()
            time.sleep(args.baseline_seconds)
            windows.append(("baseline", t0, time.monotonic(), ""))
            for label, sql in (("protect (adds column)", "SELECT fencing.protect('live.t', enforce => false)"),
                               ("unprotect", "SELECT fencing.unprotect('live.t')"),
                               ("protect (column kept)", "SELECT fencing.protect('live.t', enforce => false)")):
                t0 = time.monotonic()
                took, locks, committed = call(args.dsn, sql)
                time.sleep(args.after_seconds)
                windows.append((label, t0, committed + args.after_seconds,
                                f"call {took:.1f} ms, locks on the table: {locks}"))
        for label, t0, t1, detail in windows:
            window(w, label, t0, t1, detail, csv)
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA live CASCADE")


if __name__ == "__main__":
    main()
