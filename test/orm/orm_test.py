"""The GC-pause split brain of docs/design.md, written with two ORMs.

For Django and for SQLAlchemy, the recipe of docs/orms.md (a transaction,
SET LOCAL fencing.token, load, change, save), read from the page itself and
run as it stands, runs as two workers:
worker A (token 33) loads order 101 and pauses before it saves (the GC
pause: a hook of the ORM's own, called on A's thread only); worker B (token
34) loads, changes and saves it; then A saves.  B must be accepted, A
refused with the ORM's IntegrityError carrying SQLSTATE 23T01, and the row
must keep B's data and token 34.

Usage: orm_test.py DATABASE (PGHOST, PGPORT, PGUSER name the cluster).
Prints "test orm_django ... ok|FAILED" and "test orm_sqlalchemy ... ok|FAILED";
exits 1 if one failed.
"""

import os
import sys
import threading
import traceback

import psycopg2

DATABASE = sys.argv[1]
HOST = os.environ.get("PGHOST", "")
PORT = os.environ.get("PGPORT", "5432")
USER = os.environ.get("PGUSER", "postgres")


def sql(statement):
    """Runs one statement in its own transaction (autocommit)."""
    conn = psycopg2.connect(dbname=DATABASE, host=HOST, port=PORT, user=USER)
    conn.autocommit = True
    try:
        with conn.cursor() as cur:
            cur.execute(statement)
            return cur.fetchall() if cur.description else None
    finally:
        conn.close()


def reset_orders():
    """orders: one row, last written by an earlier holder under token 32."""
    sql("DROP TABLE IF EXISTS orders")
    sql(
        "CREATE TABLE orders (id integer PRIMARY KEY, status text NOT NULL,"
        " last_fencing_token bigint NOT NULL DEFAULT 0)"
    )
    sql("SELECT fencing.protect('orders')")
    sql("INSERT INTO orders VALUES (101, 'new', 32)")


def run_recipe(heading):
    """Runs the first code block under "## heading" of docs/orms.md (the
    page's own text, not a copy) and returns the names it defines."""
    page = open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "orms.md")).read()
    section = page.split("\n## " + heading + "\n", 1)[1]
    source = section.split("```", 2)[1].split("\n", 1)[1]
    names = {"__name__": "orms_recipe_" + heading.lower()}
    exec(compile(source, "docs/orms.md (%s)" % heading, "exec"), names)
    return names


class Pause:
    """Holds worker A between its load and its UPDATE until B has committed."""

    def __init__(self):
        self.worker_a = None
        self.a_paused = threading.Event()
        self.b_done = threading.Event()

    def __call__(self, *args, **kwargs):
        if threading.current_thread() is self.worker_a:
            self.a_paused.set()
            self.b_done.wait(timeout=30)


def sqlstate(driver_error):
    """The SQLSTATE of a driver's exception: psycopg2 names it pgcode,
    psycopg 3 sqlstate (Django 4.2 and later use psycopg 3 when it is
    installed, as in Debian 13)."""
    code = getattr(driver_error, "pgcode", None)
    return code if code is not None else getattr(driver_error, "sqlstate", None)


def split_brain(update_order, integrity_error, pause, sqlstate_of):
    """Runs the schedule; returns a list of what went wrong (empty: ok)."""
    problems = []
    outcome = {}

    def worker_a():
        try:
            update_order(101, 33, "cancelled by A")
            outcome["a"] = "accepted"
        except integrity_error as e:
            outcome["a"] = "IntegrityError " + str(sqlstate_of(e))
        except Exception as e:  # noqa: BLE001 - reported as a failure
            outcome["a"] = "%s: %s" % (type(e).__name__, e)
        finally:
            pause.a_paused.set()

    pause.worker_a = threading.Thread(target=worker_a)
    pause.worker_a.start()
    if not pause.a_paused.wait(timeout=30):
        problems.append("worker A never reached its save")
    try:
        update_order(101, 34, "shipped by B")
    except Exception as e:  # noqa: BLE001
        problems.append("worker B was refused: %s: %s" % (type(e).__name__, e))
    pause.b_done.set()
    pause.worker_a.join(timeout=60)
    if outcome.get("a") != "IntegrityError 23T01":
        problems.append("worker A's stale save: expected IntegrityError 23T01, got %s" % outcome.get("a"))
    row = sql("SELECT status, last_fencing_token FROM orders WHERE id = 101")
    if row != [("shipped by B", 34)]:
        problems.append("row is %r, expected B's data and token 34" % (row,))
    return problems


def run_django():
    import django
    from django.conf import settings

    settings.configure(
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": DATABASE,
                "USER": USER,
                "HOST": HOST,
                "PORT": PORT,
            }
        },
        INSTALLED_APPS=[],
        USE_TZ=True,
    )
    django.setup()

    # The recipe of docs/orms.md, as the page shows it.
    recipe = run_recipe("Django")
    Order, update_order = recipe["Order"], recipe["update_order"]
    from django.db import connection
    from django.db import IntegrityError
    from django.db.models.signals import pre_save

    updates = []

    def record(execute, statement, params, many, context):
        if statement.startswith("UPDATE"):
            updates.append(statement)
        return execute(statement, params, many, context)

    def update_order_on_own_connection(order_id, token, status):
        try:
            with connection.execute_wrapper(record):
                update_order(order_id, token, status)
        finally:
            connection.close()  # each thread has its own Django connection

    reset_orders()
    pause = Pause()
    pre_save.connect(pause, sender=Order)
    problems = split_brain(
        update_order_on_own_connection,
        IntegrityError,
        pause,
        lambda e: sqlstate(e.__cause__),
    )
    # Both saves sent an UPDATE that writes back the token column they loaded.
    if len(updates) != 2 or not all('"last_fencing_token" = ' in u for u in updates):
        problems.append("expected two UPDATEs assigning last_fencing_token, got %r" % updates)
    return problems


def run_sqlalchemy():
    from sqlalchemy import create_engine, event
    from sqlalchemy.exc import IntegrityError

    # The recipe of docs/orms.md, as the page shows it.
    recipe = run_recipe("SQLAlchemy")
    Order, update_order = recipe["Order"], recipe["update_order"]
    url = "postgresql+psycopg2://%s@/%s?host=%s&port=%s" % (USER, DATABASE, HOST, PORT)
    engine = create_engine(url, future=True)
    reset_orders()
    pause = Pause()
    event.listen(Order, "before_update", pause)
    try:
        return split_brain(
            lambda order_id, token, status: update_order(engine, order_id, token, status),
            IntegrityError,
            pause,
            lambda e: sqlstate(e.orig),
        )
    finally:
        engine.dispose()


def main():
    sql("CREATE EXTENSION IF NOT EXISTS fencing")
    failed = False
    for name, run in (("orm_django", run_django), ("orm_sqlalchemy", run_sqlalchemy)):
        try:
            problems = run()
        except Exception:  # noqa: BLE001
            problems = [traceback.format_exc()]
        for problem in problems:
            print("  %s: %s" % (name, problem))
        print("test %s ... %s" % (name, "FAILED" if problems else "ok"), flush=True)
        failed |= bool(problems)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
