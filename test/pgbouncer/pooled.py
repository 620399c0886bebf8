#!/usr/bin/env python3
"""Fenced writes through PgBouncer, with more clients than server connections.

Run by test/pgbouncer/run, which starts PgBouncer with two pools of one
database: fencing_tx (transaction pooling) and fencing_st (statement pooling).
Each client is a thread with its own connection to PgBouncer; every accepted
write is checked against the token that client presented, and the final rows
against every accepted write.  Prints "test pgbouncer_transaction ... ok|FAILED"
and "test pgbouncer_statement ... ok|FAILED", each after its counts.
"""
import argparse
import collections
import itertools
import json
import os
import random
import threading
import time

import psycopg

STALE = "23T01"
MISSING = "23T02"
INITIAL_TOKEN = 500  # every row starts here; the shared counter starts above it
OLD_TOKEN = 100  # below every row's token: always stale


class Run:
    """What the clients of one test did, and what they saw that they must not have."""

    def __init__(self):
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.violations = []
        self.accepted = collections.defaultdict(list)  # row -> [(token, value)]
        self.pids = collections.defaultdict(set)  # server pid -> clients that used it
        self.tokens = itertools.count(1000)

    def next_token(self):
        with self.lock:
            return next(self.tokens)

    def count(self, what, n=1):
        with self.lock:
            self.counts[what] += n

    def violation(self, text):
        with self.lock:
            self.violations.append(text)

    def accept(self, row, token, value):
        with self.lock:
            self.accepted[row].append((token, value))
            self.counts["accepted"] += 1

    def saw_pid(self, pid, client):
        with self.lock:
            self.pids[pid].add(client)


def pooled(args, dbname, autocommit=True):
    """A client connection through PgBouncer: no named prepared statements,
    which a transaction or statement pool cannot keep (PgBouncer < 1.21)."""
    return psycopg.connect(host=args.host, port=args.port, dbname=dbname, user="postgres",
                           autocommit=autocommit, prepare_threshold=None, connect_timeout=10)


def direct(args):
    return psycopg.connect(dbname=args.direct_db, autocommit=True)


def warnings_of(conn):
    """The WARNING messages the server sends on `conn`, as a list that grows."""
    seen = []
    conn.add_notice_handler(
        lambda d: seen.append(d.message_primary) if d.severity_nonlocalized == "WARNING" else None)
    return seen


def session_warning(messages):
    return any("is set for the session and will not be used" in m for m in messages)


def final_rows(args, table):
    with direct(args) as conn:
        return {r[0]: (r[1], r[2]) for r in conn.execute(
            f"SELECT id, v, last_fencing_token FROM {table} WHERE id < 1000")}


def check_final(run, rows):
    """Each row holds the newest accepted write: its token and the value written with it."""
    for row, (value, token) in rows.items():
        writes = run.accepted.get(row, [])
        want = max(writes) if writes else (INITIAL_TOKEN, "new")
        if (token, value) != want:
            run.violation(f"row {row} holds ({token}, {value!r}), the newest accepted write was {want}")


# --- transaction pooling -------------------------------------------------------

def transaction_client(args, run, client, rows):
    rng = random.Random(client)
    conn = pooled(args, "fencing_tx")
    warned = warnings_of(conn)
    try:
        for k in range(args.ops):
            row = rng.randrange(1, rows + 1)
            kind = k % 6
            if kind in (0, 1, 2):
                # A fenced transaction: the token set inside it, by a literal
                # SET LOCAL or by set_config(..., true) with a bind parameter.
                token = run.next_token()
                value = f"c{client}:{token}"
                try:
                    with conn.transaction():
                        if kind == 1:
                            conn.execute("SELECT set_config('fencing.token', %s, true)", (str(token),))
                        else:
                            conn.execute(f"SET LOCAL fencing.token = {token}")
                        stored, pid = conn.execute(
                            "UPDATE accounts SET v = %s WHERE id = %s"
                            " RETURNING last_fencing_token, pg_backend_pid()", (value, row)).fetchone()
                    run.saw_pid(pid, client)
                    if stored != token:
                        run.violation(f"client {client} presented {token}, row {row} took {stored}")
                    run.accept(row, token, value)
                except psycopg.Error as e:
                    if e.sqlstate != STALE:
                        raise
                    run.count("stale (overtaken)")
            elif kind == 3:
                # A holder whose lease has long passed on.
                try:
                    with conn.transaction():
                        conn.execute(f"SET LOCAL fencing.token = {OLD_TOKEN}")
                        conn.execute("UPDATE accounts SET v = 'zombie' WHERE id = %s", (row,))
                    run.violation(f"client {client}: token {OLD_TOKEN} accepted on row {row}")
                except psycopg.Error as e:
                    run.count("stale (old token) refused" if e.sqlstate == STALE else f"unexpected {e.sqlstate}")
            elif kind == 4:
                # No token: on a server connection other clients' transactions
                # have just set theirs on; it must never borrow one.
                try:
                    if k % 12 == 4:
                        conn.execute("UPDATE accounts SET v = 'unfenced' WHERE id = %s", (row,))
                    else:
                        with conn.transaction():
                            conn.execute("UPDATE accounts SET v = 'unfenced' WHERE id = %s", (row,))
                    run.violation(f"client {client}: unfenced write accepted on row {row}")
                except psycopg.Error as e:
                    if e.sqlstate != MISSING:
                        raise
                    run.count("unfenced refused (23T02)")
                    if "set for the session by an earlier transaction" in (e.diag.message_detail or ""):
                        run.count("23T02 naming a session-level value")
            else:
                # A session-level SET: it warns, and the write after it (its own
                # transaction, perhaps on another server connection) is refused.
                session_set_then_write(run, conn, warned, client, run.next_token(),
                                       "UPDATE accounts SET v = 'session' WHERE id = %s", row)
    finally:
        conn.close()


def session_set_then_write(run, conn, warned, client, token, write, row):
    """A session-level SET through the pooler: it must warn, and the write
    after it (its own transaction, perhaps on another server connection)
    must be refused with 23T02."""
    before = len(warned)
    conn.execute(f"SET fencing.token = {token}")
    if session_warning(warned[before:]):
        run.count("session-level SET warned")
    else:
        run.violation(f"client {client}: SET fencing.token = {token} did not warn")
    try:
        conn.execute(write, (row,))
        run.violation(f"client {client}: {write.split()[0]} after a session-level SET accepted")
    except psycopg.Error as e:
        if e.sqlstate != MISSING:
            raise
        run.count("write after session-level SET refused (23T02)")


def test_transaction(args):
    run = Run()
    rows = 5
    with direct(args) as conn:
        conn.execute("CREATE TABLE accounts (id int PRIMARY KEY, v text)")
        conn.execute("SELECT fencing.protect('accounts')")
        conn.execute("INSERT INTO accounts SELECT g, 'new', %s FROM generate_series(1, %s) g",
                     (INITIAL_TOKEN, rows))
    run_clients(args, run, transaction_client, rows)
    check_final(run, final_rows(args, "accounts"))
    if len(run.pids) > args.tx_pool:
        run.violation(f"{len(run.pids)} server connections behind a pool of {args.tx_pool}")
    shared = sum(1 for clients in run.pids.values() if len(clients) > 1)
    if shared == 0:
        run.violation("no server connection served two clients: nothing was pooled")
    run.counts["server connections"] = len(run.pids)
    run.counts["server connections shared by clients"] = shared
    return report("pgbouncer_transaction", args, run)


# --- statement pooling ---------------------------------------------------------

def statement_client(args, run, client, rows):
    rng = random.Random(1000 + client)
    conn = pooled(args, "fencing_st")
    warned = warnings_of(conn)
    try:
        for k in range(args.ops):
            row = rng.randrange(1, rows + 1)
            kind = k % 5
            token = run.next_token()
            value = f"c{client}:{token}"
            if kind == 0:
                # fenced_update(): the compare-and-write is the statement.
                applied = conn.execute(
                    "SELECT fencing.fenced_update('items', %s::jsonb, %s, %s::jsonb, 'skip')",
                    (json.dumps({"id": row}), token, json.dumps({"v": value}))).fetchone()[0]
                if applied:
                    run.accept(row, token, value)
                else:
                    run.count("stale (overtaken)")
            elif kind == 1:
                # The statement assigns the token column itself.
                try:
                    stored = conn.execute(
                        "UPDATE items SET v = %s, last_fencing_token = %s WHERE id = %s"
                        " RETURNING last_fencing_token", (value, token, row)).fetchone()[0]
                    if stored != token:
                        run.violation(f"client {client} presented {token}, row {row} took {stored}")
                    run.accept(row, token, value)
                except psycopg.Error as e:
                    if e.sqlstate != STALE:
                        raise
                    run.count("stale (overtaken)")
            elif kind == 2:
                # INSERT carries its token; a DELETE needs fencing.token, set by
                # the same query string (one implicit transaction: simple
                # protocol, no bind parameters).
                key = 1000 + client * args.ops + k
                conn.execute("INSERT INTO items VALUES (%s, %s, %s)", (key, value, token))
                deleter = run.next_token()
                conn.execute(f"SET LOCAL fencing.token = {deleter}; DELETE FROM items WHERE id = {key}")
                run.count("insert + delete (one query string)")
                try:
                    conn.execute("INSERT INTO items VALUES (%s, 'resurrected', %s)", (key, token))
                    run.violation(f"client {client}: key {key} deleted under {deleter} re-inserted under {token}")
                except psycopg.Error as e:
                    if e.sqlstate != STALE:
                        raise
                    run.count("re-insert under the older token refused")
            elif kind == 3:
                # An old token: skipped, or refused.
                applied = conn.execute(
                    "SELECT fencing.fenced_update('items', %s::jsonb, %s, '{\"v\": \"zombie\"}', 'skip')",
                    (json.dumps({"id": row}), OLD_TOKEN)).fetchone()[0]
                if applied:
                    run.violation(f"client {client}: token {OLD_TOKEN} applied to row {row}")
                try:
                    conn.execute("SELECT fencing.fenced_update('items', %s::jsonb, %s, '{\"v\": \"zombie\"}')",
                                 (json.dumps({"id": row}), OLD_TOKEN))
                    run.violation(f"client {client}: token {OLD_TOKEN} accepted on row {row}")
                except psycopg.Error as e:
                    if e.sqlstate != STALE:
                        raise
                    run.count("stale (old token) refused", 2)
            else:
                # A session-level SET warns here too; the write after it is refused.
                session_set_then_write(run, conn, warned, client, token,
                                       "DELETE FROM items WHERE id = %s", row)
    finally:
        conn.close()


def transaction_block_refused(args, run):
    """Statement pooling refuses a transaction of several statements."""
    conn = pooled(args, "fencing_st", autocommit=False)
    try:
        token = run.next_token()
        conn.execute(f"SET LOCAL fencing.token = {token}")  # psycopg sends BEGIN first
        conn.execute("UPDATE items SET v = 'in a block' WHERE id = 1")
        conn.commit()
        run.violation("a transaction block ran through statement pooling")
    except psycopg.Error as e:
        run.count("transaction blocks refused by PgBouncer")
        run.refusal = str(e).strip().splitlines()[0]
    finally:
        conn.close()


def test_statement(args):
    run = Run()
    rows = 5
    with direct(args) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, v text)")
        conn.execute("SELECT fencing.protect('items')")
        conn.execute("INSERT INTO items SELECT g, 'new', %s FROM generate_series(1, %s) g",
                     (INITIAL_TOKEN, rows))
    run_clients(args, run, statement_client, rows)
    transaction_block_refused(args, run)
    with direct(args) as conn:
        left = conn.execute("SELECT count(*) FROM items WHERE id >= 1000").fetchone()[0]
        if left:
            run.violation(f"{left} inserted rows were not deleted")
    check_final(run, final_rows(args, "items"))
    return report("pgbouncer_statement", args, run)


# --- common --------------------------------------------------------------------

def run_clients(args, run, body, rows):
    errors = []

    def client(i):
        try:
            body(args, run, i, rows)
        except Exception as e:  # noqa: BLE001 - reported as a violation
            errors.append(f"client {i}: {type(e).__name__}: {e}")

    started = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(args.timeout)
        if t.is_alive():
            errors.append("a client did not finish in time")
    for e in errors:
        run.violation(e)
    run.seconds = time.monotonic() - started


def report(name, args, run):
    pool = args.tx_pool if name.endswith("transaction") else args.st_pool
    print(f"{name}: {args.clients} clients, pool_size {pool}, {args.ops} operations each,"
          f" {run.seconds:.1f} s")
    for what, n in sorted(run.counts.items()):
        print(f"    {what}: {n}")
    if getattr(run, "refusal", None):
        print(f"    PgBouncer said: {run.refusal}")
    for v in run.violations[:20]:
        print(f"    VIOLATION: {v}")
    ok = not run.violations
    print(f"test {name:<28}... {'ok' if ok else 'FAILED'}", flush=True)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", required=True, help="PgBouncer's socket directory")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--direct-db", required=True, help="the database, for direct set-up and checks")
    parser.add_argument("--tx-pool", type=int, required=True)
    parser.add_argument("--st-pool", type=int, required=True)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--ops", type=int, default=int(os.environ.get("FENCING_PGBOUNCER_OPS", 120)))
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    ok = test_transaction(args)
    ok = test_statement(args) and ok
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
