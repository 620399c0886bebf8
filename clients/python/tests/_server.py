"""What the tests against a real server share (PGHOST, PGPORT, PGUSER,
PGDATABASE with the fencing extension available, as test/dev gives them;
skipped without one): the `conn` fixture, a protected table, names."""

import time
import uuid

import psycopg
import pytest

import fencing

TABLE = "pytest_fencing_orders"


@pytest.fixture(scope="module")
def conn():
    try:
        conn = psycopg.connect("", autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as e:
        pytest.skip(f"no server: {e}")
    conn.execute("SET client_min_messages = warning")
    conn.execute("CREATE EXTENSION IF NOT EXISTS fencing")
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(f"CREATE TABLE {TABLE} (id int PRIMARY KEY, status text, "
                 "last_fencing_token bigint NOT NULL DEFAULT 0)")
    conn.execute("SELECT fencing.protect(%s)", (TABLE,))
    with fencing.fenced(conn, 1) as cur:
        cur.execute(f"INSERT INTO {TABLE} SELECT i, 'new' FROM generate_series(1, 20) i")
    yield conn
    conn.execute(f"DROP TABLE {TABLE}")
    conn.close()


def name(prefix):
    return f"{prefix}:{uuid.uuid4().hex[:8]}"


def live(conn, resource):
    row = conn.execute("SELECT holder, token, live FROM fencing.leases WHERE resource = %s",
                       (resource,)).fetchone()
    return row


def stored(conn, key):
    return conn.execute(f"SELECT last_fencing_token FROM {TABLE} WHERE id = %s", (key,)).fetchone()[0]


def waiters(conn, application_name=None):
    """Backends inside fencing.acquire()/campaign(): [pid], optionally of one application_name."""
    sql = ("SELECT pid FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() "
           "AND query ~* 'fencing\\.(acquire|campaign)\\M'")
    params = ()
    if application_name is not None:
        sql += " AND application_name = %s"
        params = (application_name,)
    return [row[0] for row in conn.execute(sql, params).fetchall()]


def wait_until(predicate, timeout=30.0, step=0.05):
    """Polls `predicate` (the test's question, not the client's) until true;
    False after `timeout` (generous: the machine may be loaded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return bool(predicate())


def cancel_a_wait(conn, call, cancel, holder):
    """Runs call() (a wait) in a thread, sets `cancel` once its backend waits
    in fencing.acquire(); the exception the call ended with (None if none),
    after its backend stopped waiting."""
    import threading
    outcome = {}

    def run():
        try:
            call()
        except BaseException as e:
            outcome["error"] = e
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert wait_until(lambda: len(waiters(conn, f"fencing keepalive {holder}")) == 1)
    cancel.set()
    thread.join(30)
    assert not thread.is_alive()
    assert wait_until(lambda: not waiters(conn, f"fencing keepalive {holder}"), 10)
    return outcome.get("error")
