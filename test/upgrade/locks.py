"""ALTER EXTENSION fencing UPDATE and the locks of protected tables (called
by test/upgrade/online --current-only), for each released version's objects
served by the current library:

  deadlock: a transaction that wrote one protected table (of higher OID) and
    then writes another while the update starts: both must succeed, no 40P01;
  stall: a role's open transaction on its own protected table must not stop
    reads of another protected table while the update waits for it; the
    update finishes once that transaction ends.

Prints "test upgrade_locks_<what>_<version> ... ok|FAILED".
"""

import argparse
import sys
import threading
import time

import psycopg


def fresh(admin, db, old):
    admin.execute(f"DROP DATABASE IF EXISTS {db}")
    admin.execute(f"CREATE DATABASE {db}")
    s = psycopg.connect(f"dbname={db}", autocommit=True)
    s.execute(f"CREATE EXTENSION fencing VERSION '{old}'")
    return s


def update_in_thread(db, result):
    def run():
        try:
            with psycopg.connect(f"dbname={db}", autocommit=True) as u:
                u.execute("ALTER EXTENSION fencing UPDATE")
            result["update"] = "ok"
        except psycopg.Error as e:
            result["update"] = f"{e.sqlstate} {str(e).splitlines()[0]}"
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def deadlock(admin, old):
    db = "fencing_locks_deadlock"
    s = fresh(admin, db, old)
    for t in ("a", "b"):  # b has the higher OID
        s.execute(f"CREATE TABLE {t} (id int PRIMARY KEY, v int)")
        s.execute(f"SELECT fencing.protect('{t}')")
        s.execute(f"INSERT INTO {t} VALUES (1, 0, 10)")
    res = {}
    w = psycopg.connect(f"dbname={db}")
    w.execute("SET LOCAL fencing.token = 20")
    w.execute("UPDATE b SET v = 1 WHERE id = 1")  # b first
    t = update_in_thread(db, res)
    time.sleep(0.5)
    try:
        w.execute("UPDATE a SET v = 1 WHERE id = 1")
        w.commit()
        res["writer"] = "ok"
    except psycopg.Error as e:
        res["writer"] = f"{e.sqlstate} {str(e).splitlines()[0]}"
        w.rollback()
    t.join(30)
    res.setdefault("update", "still waiting after 30 s")
    w.close()
    s.close()
    admin.execute(f"DROP DATABASE {db} WITH (FORCE)")
    ok = res == {"update": "ok", "writer": "ok"}
    print(f"  {old}: {res}")
    return ok


def stall(admin, old):
    db = "fencing_locks_stall"
    s = fresh(admin, db, old)
    s.execute("DROP ROLE IF EXISTS fencing_locks_role")
    s.execute("CREATE ROLE fencing_locks_role LOGIN")
    s.execute("GRANT USAGE ON SCHEMA fencing TO fencing_locks_role")
    s.execute("GRANT CREATE ON SCHEMA public TO fencing_locks_role")
    s.execute("CREATE TABLE orders (id int PRIMARY KEY, v int)")  # the lower OID
    s.execute("SELECT fencing.protect('orders')")
    s.execute("INSERT INTO orders VALUES (1, 0, 10)")
    m = psycopg.connect(f"dbname={db} user=fencing_locks_role", autocommit=True)
    m.execute("CREATE TABLE mine (id int PRIMARY KEY)")
    m.execute("SELECT fencing.protect('mine')")
    m.execute("BEGIN")
    m.execute("SELECT * FROM mine")  # holds its lock, idle
    res = {}
    t = update_in_thread(db, res)
    time.sleep(1)
    read = "ok"
    with psycopg.connect(f"dbname={db}", autocommit=True) as r:
        r.execute("SET statement_timeout = '3s'")
        try:
            r.execute("SELECT count(*) FROM orders")
        except psycopg.Error as e:
            read = f"{e.sqlstate} {str(e).splitlines()[0]}"
    waiting = t.is_alive()
    m.execute("ROLLBACK")
    t.join(30)
    res.setdefault("update", "still waiting after 30 s")
    m.close()
    s.close()
    admin.execute(f"DROP DATABASE {db} WITH (FORCE)")
    admin.execute("DROP ROLE fencing_locks_role")
    print(f"  {old}: read of another table while the update waited: {read}; "
          f"update waited for the open transaction: {waiting}; then: {res['update']}")
    return read == "ok" and waiting and res["update"] == "ok"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--old", action="append", default=None)
    args = parser.parse_args()
    status = 0
    admin = psycopg.connect("dbname=postgres", autocommit=True)
    for old in args.old or ["0.1.0", "0.2.0", "0.3.0"]:
        for name, check in (("deadlock", deadlock), ("stall", stall)):
            ok = check(admin, old)
            print(f"test upgrade_locks_{name}_{old.replace('.', '_')} ... {'ok' if ok else 'FAILED'}")
            status |= 0 if ok else 1
    return status


if __name__ == "__main__":
    sys.exit(main())
