"""Waits that last and how they end, LeaseBusy, the default identity, the
decorator, the fenced helper's bound, the loss line, release's contract:
against a real server (skipped without one)."""

import asyncio
import datetime
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import psycopg
import pytest

import fencing
import fencing.aio

from _server import TABLE, cancel_a_wait, conn, live, name, stored, wait_until, waiters  # noqa: F401


def keepalives(conn, holder):
    return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
                        (f"fencing keepalive {holder}",)).fetchone()[0]


def test_default_identity_is_the_lease_holder(conn):
    resource = name("id")
    with fencing.Lease("", resource, ttl=2) as lease:
        assert live(conn, resource) == (lease.holder, lease.token, True)
        assert keepalives(conn, lease.holder) == 1
        with pytest.raises(fencing.LeaseBusy):       # another identity: busy, not its own lease
            fencing.Lease("", resource, ttl=2).acquire()


def test_busy_try_and_timed_out_wait(conn):
    resource = name("busy")
    with fencing.Lease("", resource, ttl=2):
        started = time.monotonic()
        with pytest.raises(fencing.LeaseBusy):
            fencing.Lease("", resource, ttl=2, wait=0).acquire()
        with pytest.raises(fencing.LeaseTimeout) as waited:
            fencing.Lease("", resource, ttl=2, wait=datetime.timedelta(milliseconds=600)).acquire()
        assert not isinstance(waited.value, fencing.LeaseBusy)
        assert 0.5 <= time.monotonic() - started < 10


def test_wait_forever_is_one_server_side_call(conn):
    resource = name("forever")
    holder = fencing.default_holder()
    first = fencing.Lease("", resource, ttl=1.5)
    first.acquire()
    waiter = fencing.Lease("", resource, holder=holder, ttl=1.5, wait=fencing.FOREVER)
    done = threading.Thread(target=waiter.acquire, daemon=True)
    done.start()
    name_b = f"fencing keepalive {holder}"
    assert wait_until(lambda: len(waiters(conn, name_b)) == 1)
    started = conn.execute("SELECT pid, query_start FROM pg_stat_activity WHERE application_name = %s",
                           (name_b,)).fetchone()
    time.sleep(2.5)                  # past the ttl: the holder renews, the waiter waits
    assert waiter.token is None
    assert conn.execute("SELECT pid, query_start FROM pg_stat_activity WHERE application_name = %s",
                        (name_b,)).fetchone() == started
    assert first.release() is True
    done.join(30)
    assert waiter.token is not None and waiter.token > first.token
    assert live(conn, resource) == (holder, waiter.token, True)
    assert waiter.release() is True


def test_a_cancel_event_ends_the_wait_and_leaves_nothing_queued(conn):
    resource = name("cancel")
    first = fencing.Lease("", resource, ttl=2)
    first.acquire()
    cancel = threading.Event()
    waiter = fencing.Lease("", resource, ttl=2, wait=fencing.FOREVER, cancel=cancel)
    error = cancel_a_wait(conn, waiter.acquire, cancel, waiter.holder)
    assert isinstance(error, fencing.LeaseCancelled) and waiter.token is None
    # the client has closed its connection; its backend leaves pg_stat_activity
    # a moment later (a loaded machine lags the close)
    assert wait_until(lambda: keepalives(conn, waiter.holder) == 0, 10)
    # the next in line after the cancelled one gets the lease at the release
    third = fencing.Lease("", resource, ttl=2, wait=60)
    thread = threading.Thread(target=third.acquire, daemon=True)
    thread.start()
    assert wait_until(lambda: len(waiters(conn, f"fencing keepalive {third.holder}")) == 1)
    assert first.release() is True
    thread.join(30)
    assert third.token > first.token and live(conn, resource) == (third.holder, third.token, True)
    assert third.release() is True


def dropping_the_first_cancel(monkeypatch, connection=psycopg.Connection):
    """psycopg's cancel requests, the first one dropped, as PostgreSQL drops
    a cancel that comes while it still reads the call's messages."""
    sent = []
    real = connection.cancel

    def cancel(self):
        sent.append(time.monotonic())
        if len(sent) > 1:
            real(self)
    monkeypatch.setattr(connection, "cancel", cancel)
    return sent


def test_a_dropped_cancel_is_sent_again(conn, monkeypatch):
    sent = dropping_the_first_cancel(monkeypatch)
    resource = name("dropped")
    with fencing.Lease("", resource, ttl=2):
        cancel = threading.Event()
        waiter = fencing.Lease("", resource, ttl=2, wait=fencing.FOREVER, cancel=cancel)
        error = cancel_a_wait(conn, waiter.acquire, cancel, waiter.holder)
        assert isinstance(error, fencing.LeaseCancelled) and len(sent) >= 2


async def cancel_an_aio_wait(conn, waiter):
    """Starts waiter.acquire() (a wait), cancels its task once its backend
    waits in fencing.acquire(), and awaits the CancelledError."""
    task = asyncio.ensure_future(waiter.acquire())
    for _ in range(600):
        if waiters(conn, f"fencing keepalive {waiter.holder}"):
            break
        await asyncio.sleep(0.05)
    assert waiters(conn, f"fencing keepalive {waiter.holder}")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)


def test_a_dropped_cancel_is_sent_again_by_asyncio(conn, monkeypatch):
    sent = dropping_the_first_cancel(monkeypatch, psycopg.AsyncConnection)
    resource = name("aiodropped")

    async def main():
        async with fencing.aio.Lease("", resource, ttl=2):
            waiter = fencing.aio.Lease("", resource, ttl=2, wait=fencing.FOREVER)
            await cancel_an_aio_wait(conn, waiter)
            return waiter.holder
    holder = asyncio.run(main())
    assert len(sent) >= 2
    assert wait_until(lambda: not waiters(conn, f"fencing keepalive {holder}"), 10)


def test_a_set_cancel_event_sends_nothing(conn):
    cancel = threading.Event()
    cancel.set()
    resource = name("cancelled")
    with fencing.Lease("", resource, ttl=2):
        with pytest.raises(fencing.LeaseCancelled):
            fencing.Lease("", resource, ttl=2, wait=10, cancel=cancel).acquire()


CTRL_C = textwrap.dedent("""
    import sys, fencing
    lease = fencing.Lease("", sys.argv[1], holder=sys.argv[2], ttl=2, wait=fencing.FOREVER)
    try:
        lease.acquire()
        print("granted", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
""")


def test_ctrl_c_ends_the_wait_and_cancels_the_call(conn):
    resource, holder = name("ctrlc"), name("ctrl-c")
    with fencing.Lease("", resource, ttl=5) as first:
        # SIGINT's default restored, as in a terminal: a suite started in the
        # background (`&` without job control) ignores SIGINT, its children
        # inherit that, and Python then installs no KeyboardInterrupt handler
        child = subprocess.Popen([sys.executable, "-c", CTRL_C, resource, holder], stdout=subprocess.PIPE,
                                 text=True, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)),
                                 preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            # interrupted only once its call sleeps in the wait (wait_event_type
            # 'Extension'): 'active' is shown from the Parse message on, and a
            # cancel request the backend takes between the protocol's messages
            # (before Execute) is dropped by PostgreSQL, the wait then lasts
            asleep = ("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
                      " AND state = 'active' AND wait_event_type = 'Extension'")
            assert wait_until(lambda: conn.execute(asleep, (f"fencing keepalive {holder}",)).fetchone()[0] == 1, 60)
            child.send_signal(signal.SIGINT)
            out, _ = child.communicate(timeout=60)
        finally:
            if child.poll() is None:
                child.kill()
        assert out.strip() == "interrupted"
        assert wait_until(lambda: not waiters(conn, f"fencing keepalive {holder}"), 10)
        first.check()


def test_asyncio_cancel_ends_the_wait_and_cancels_the_call(conn):
    resource = name("aiocancel")

    async def main():
        async with fencing.aio.Lease("", resource, ttl=2) as first:
            waiter = fencing.aio.Lease("", resource, ttl=2, wait=fencing.FOREVER)
            await cancel_an_aio_wait(conn, waiter)
            assert not waiters(conn, f"fencing keepalive {waiter.holder}")
            return first.token, waiter.holder
    token, holder = asyncio.run(main())
    assert keepalives(conn, holder) == 0 and live(conn, resource)[2] is False


def test_the_decorator_keys_the_lease_by_the_arguments(conn):
    seen = {}

    @fencing.leased("pay:{order_id}", ttl=2)
    def pay(order_id, amount=10, *, lease):
        seen["live"] = live(conn, f"pay:{order_id}")
        with fencing.fenced(conn, lease) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'paid' WHERE id = %s", (order_id,))
        return lease.token
    token = pay(8)
    assert seen["live"][1:] == (token, True) and stored(conn, 8) == token
    assert live(conn, "pay:8")[2] is False           # released when the function returned
    assert pay.__name__ == "pay"

    @fencing.leased("fail:{0}", ttl=2)
    def fails(key):
        raise RuntimeError(key)
    with pytest.raises(RuntimeError):
        fails("x")
    assert live(conn, "fail:x")[2] is False          # released when it raised


def test_the_decorator_ends_with_lease_lost(conn):
    resource = name("lost")

    @fencing.leased("{resource}", ttl=1.5)
    def work(resource, lease):
        conn.execute("SELECT fencing.release(%s, %s, %s)", (resource, lease.holder, lease.token))
        assert lease.lost.wait(10)
        return "done"
    with pytest.raises(fencing.LeaseLost):
        work(resource)


def test_the_async_decorator(conn):
    @fencing.leased("apay:{order_id}", ttl=2)
    async def pay(order_id, lease):
        assert isinstance(lease, fencing.aio.Lease)
        aconn = await psycopg.AsyncConnection.connect("", autocommit=True)
        try:
            async with fencing.aio.fenced(aconn, lease) as cur:
                await cur.execute(f"UPDATE {TABLE} SET status = 'apaid' WHERE id = %s", (order_id,))
        finally:
            await aconn.close()
        return lease.token
    token = asyncio.run(pay(9))
    assert stored(conn, 9) == token and live(conn, "apay:9")[2] is False


def test_fenced_bounds_its_transaction_by_the_lease(conn):
    with fencing.Lease("", name("bound"), ttl=3) as lease:
        with fencing.fenced(conn, lease) as cur:
            cur.execute("SHOW idle_in_transaction_session_timeout")
            shown = cur.fetchone()[0]
        assert shown.endswith("ms") or shown.endswith("s")
        milliseconds = int(shown[:-2]) if shown.endswith("ms") else int(shown[:-1]) * 1000
        assert 0 < milliseconds <= 3000
    assert conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "0"
    with fencing.fenced(conn, 12345) as cur:           # a plain token has no deadline
        cur.execute("SHOW idle_in_transaction_session_timeout")
        assert cur.fetchone()[0] == "0"


def test_fenced_bound_of_a_long_lease_is_within_the_settings_range(conn):
    # 366 days (the longest ttl) is 31622400000 ms, past the largest timeout
    # PostgreSQL and libpq take (INT_MAX ms)
    with fencing.Lease("", name("long"), ttl=366 * 86400) as lease:
        with fencing.fenced(conn, lease) as cur:
            cur.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'idle_in_transaction_session_timeout'")
            assert cur.fetchone()[0] == 2**31 - 1


def test_a_frozen_holder_is_ended_at_its_deadline(conn):
    resource = name("frozen")
    work = psycopg.connect("", autocommit=True)
    try:
        with fencing.Lease("", resource, ttl=1) as lease:
            with pytest.raises((psycopg.OperationalError, fencing.LeaseLost)):
                with fencing.fenced(work, lease) as cur:
                    cur.execute(f"UPDATE {TABLE} SET status = 'frozen' WHERE id = 10")
                    time.sleep(2.5)                   # idle in transaction past the deadline
        assert work.closed or work.broken
    finally:
        work.close()
    # the row lock went with the ended session: another write goes through at once
    other = psycopg.connect("", autocommit=True, options="-c lock_timeout=2000")
    try:
        with fencing.fenced(other, 10**15) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'next' WHERE id = 10")
    finally:
        other.close()
    assert conn.execute(f"SELECT status FROM {TABLE} WHERE id = 10").fetchone()[0] == "next"


def test_the_loss_is_logged_at_warning(conn, caplog):
    caplog.set_level(logging.WARNING, logger="fencing")
    resource = name("logged")
    with fencing.Lease("", resource, ttl=1.5) as lease:
        conn.execute("SELECT fencing.release(%s, %s, %s)", (resource, lease.holder, lease.token))
        assert lease.lost.wait(10)
        assert lease.release() is False                # lost already: False, no error
    lines = [r for r in caplog.records if r.name == "fencing" and r.levelno == logging.WARNING]
    assert [r.getMessage() for r in lines] == [
        f"fencing: lease on {resource} lost (holder {lease.holder}, token {lease.token}): "
        "a renewal was refused: the server no longer has the lease"]


def test_a_session_renews_at_a_third_of_the_shortest_ttl(conn):
    with fencing.Session("") as session:
        short = session.lease(name("short"), ttl=1.5)
        long = session.lease(name("long"), ttl=30)
        time.sleep(2)
        short.check()
        left = conn.execute("SELECT extract(epoch FROM expires_at - clock_timestamp()) FROM fencing.leases "
                            "WHERE resource = %s", (long.resource,)).fetchone()[0]
        assert float(left) > 28.5                     # renewed with the short one, its own ttl
        assert keepalives(conn, session.holder) == 1


def test_unsupported_server_without_the_extension(conn):
    database = "pytest_fencing_noext"
    conn.execute(f"DROP DATABASE IF EXISTS {database}")
    conn.execute(f"CREATE DATABASE {database}")
    try:
        with pytest.raises(fencing.UnsupportedServer, match="CREATE EXTENSION"):
            fencing.Lease(f"dbname={database}", "r", ttl=1).acquire()
        with pytest.raises(fencing.UnsupportedServer):
            asyncio.run(fencing.aio.Lease(f"dbname={database}", "r", ttl=1).acquire())
    finally:
        conn.execute(f"DROP DATABASE {database} WITH (FORCE)")


def end_keepalive(conn, lease):
    """The lease's keepalive connection ended, and its reconnects refused."""
    lease.conninfo = "host=/nonexistent/fencing-test port=1 connect_timeout=1"
    conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                 (f"fencing keepalive {lease.holder}",))


def test_release_raises_a_network_error(conn):
    lease = fencing.Lease("", name("network"), ttl=5)
    lease.acquire()
    end_keepalive(conn, lease)
    with pytest.raises(psycopg.OperationalError):
        lease.release()
    assert lease.lost.is_set() and lease.release() is False     # once only
    assert live(conn, lease.resource)[2] is True                # the server still has it: its ttl ends it


def test_leaving_with_on_an_exception_logs_the_failed_release(conn, caplog):
    caplog.set_level(logging.WARNING, logger="fencing")
    with pytest.raises(RuntimeError, match="the user's"):
        with fencing.Lease("", name("network"), ttl=5) as lease:
            end_keepalive(conn, lease)
            raise RuntimeError("the user's error")
    assert any("release of" in r.getMessage() and lease.resource in r.getMessage() for r in caplog.records)
