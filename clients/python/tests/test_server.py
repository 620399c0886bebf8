"""The client against a real server (PGHOST, PGPORT, PGUSER, PGDATABASE with
the fencing extension available, as test/dev gives them); skipped without one."""

import asyncio
import os
import subprocess
import sys
import threading
import time

import psycopg
import pytest

import fencing
import fencing.aio

from _server import TABLE, conn, live, name, stored  # noqa: F401  (conn: a fixture)


def test_lease_write_and_release(conn):
    resource = name("order")
    with fencing.Lease("", resource, holder="worker-a", ttl=2) as lease:
        assert live(conn, resource) == ("worker-a", lease.token, True)
        keepalive = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                                 "'fencing keepalive worker-a'").fetchone()[0]
        assert keepalive == 1
        with fencing.fenced(conn, lease) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'paid' WHERE id = 1")
            assert cur.rowcount == 1
        assert stored(conn, 1) == lease.token
        assert 0 < lease.deadline - time.monotonic() <= 2
    assert lease.lost.is_set() and live(conn, resource)[2] is False
    with pytest.raises(fencing.LeaseLost):
        lease.check()


def test_keepalive_outlives_the_ttl(conn):
    resource = name("order")
    with fencing.Lease("", resource, holder="worker-k", ttl=1) as lease:
        time.sleep(2.5)
        lease.check()
        assert live(conn, resource) == ("worker-k", lease.token, True)


def test_busy_own_and_waited_leases(conn):
    resource = name("order")
    with fencing.Lease("", resource, holder="worker-a", ttl=1) as first:
        with pytest.raises(fencing.LeaseBusy):
            fencing.Lease("", resource, holder="worker-b", ttl=1).acquire()
        with pytest.raises(fencing.LeaseAlreadyHeld) as held:
            fencing.Lease("", resource, holder="worker-a", ttl=1, wait=3).acquire()
        assert held.value.token == first.token
        first_token = first.token
    with fencing.Lease("", resource, holder="worker-b", ttl=1, wait=2) as second:
        assert second.token > first_token


def test_stale_write_calls_the_hook_and_raises(conn):
    calls = []
    before = fencing.stale_refusals()
    with fencing.fenced(conn, 5000) as cur:
        cur.execute(f"UPDATE {TABLE} SET status = 'x' WHERE id = 2")
    with pytest.raises(fencing.StaleTokenError) as refused:
        with fencing.fenced(conn, 4999, on_stale=calls.append) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'late' WHERE id = 2")
    error = refused.value
    assert calls == [error] and fencing.stale_refusals() == before + 1
    assert (error.table, error.column, error.constraint, error.key, error.presented, error.stored) == (
        TABLE, "last_fencing_token", "fencing_stale_token", "(id)=(2)", 4999, 5000)
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_missing_token_is_translated(conn):
    with pytest.raises(fencing.MissingTokenError) as refused:
        try:
            with conn.transaction():
                conn.execute(f"UPDATE {TABLE} SET status = 'x' WHERE id = 3")
        except psycopg.Error as e:
            raise fencing.translate(e) from e
    assert refused.value.constraint == "fencing_missing_token" and refused.value.presented is None


def test_lost_lease_writes_nothing(conn, monkeypatch):
    resource = name("order")
    with fencing.Lease("", resource, holder="worker-f", ttl=2) as lease:
        real = time.monotonic
        monkeypatch.setattr(time, "monotonic", lambda: real() + 3)     # as after a freeze
        with pytest.raises(fencing.LeaseLost):
            with fencing.fenced(conn, lease) as cur:
                cur.execute(f"UPDATE {TABLE} SET status = 'never' WHERE id = 4")
        monkeypatch.undo()
        assert lease.lost.is_set()
    assert conn.execute(f"SELECT status FROM {TABLE} WHERE id = 4").fetchone()[0] == "new"


def test_loss_before_commit_rolls_back(conn):
    resource = name("order")
    with fencing.Lease("", resource, holder="worker-c", ttl=2) as lease:
        with pytest.raises(fencing.LeaseLost):
            with fencing.fenced(conn, lease) as cur:
                cur.execute(f"UPDATE {TABLE} SET status = 'rolled back' WHERE id = 5")
                lease._state.lose("a renewal was refused")
    assert conn.execute(f"SELECT status FROM {TABLE} WHERE id = 5").fetchone()[0] == "new"


def test_fenced_refuses_an_open_transaction(conn):
    other = psycopg.connect("")
    try:
        other.execute("SELECT 1")
        with pytest.raises(fencing.FencingError):
            with fencing.fenced(other, 7):
                pass
    finally:
        other.close()


def test_release_on_exception(conn):
    resource = name("order")
    with pytest.raises(RuntimeError):
        with fencing.Lease("", resource, holder="worker-e", ttl=2):
            raise RuntimeError("inside")
    assert live(conn, resource)[2] is False


def test_session_renews_all_on_one_connection(conn):
    resources = [name("order"), name("order")]
    with fencing.Session("", holder="worker-s") as session:
        leases = [session.lease(r, ttl=1) for r in resources]
        time.sleep(2.5)
        for lease in leases:
            lease.check()
            assert live(conn, lease.resource) == ("worker-s", lease.token, True)
        count = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = "
                             "'fencing keepalive worker-s'").fetchone()[0]
        assert count == 1
        assert leases[0].release() is True
        assert not leases[1].lost.is_set()
    assert all(lease.lost.is_set() for lease in leases)
    assert all(live(conn, r)[2] is False for r in resources)


def test_asyncio(conn):
    resource = name("order")

    async def main():
        aconn = await psycopg.AsyncConnection.connect("", autocommit=True)
        try:
            async with fencing.aio.Lease("", resource, holder="worker-aio", ttl=1) as lease:
                await asyncio.sleep(2)
                lease.check()
                async with fencing.aio.fenced(aconn, lease) as cur:
                    await cur.execute(f"UPDATE {TABLE} SET status = 'async' WHERE id = 6")
                token = lease.token
            assert lease.lost.is_set()
            with pytest.raises(fencing.StaleTokenError):
                async with fencing.aio.fenced(aconn, token - 1) as cur:
                    await cur.execute(f"UPDATE {TABLE} SET status = 'late' WHERE id = 6")
            async with fencing.aio.Session("", holder="worker-aios") as session:
                one = await session.lease(name("order"), ttl=1)
                await asyncio.sleep(1.5)
                one.check()
            assert one.lost.is_set()
            return token
        finally:
            await aconn.close()

    token = asyncio.run(main())
    assert stored(conn, 6) == token and live(conn, resource)[2] is False


def test_split_brain_example(conn):
    """examples/split_brain.py (test/replay --client python) at a fast scale."""
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "split_brain.py")
    result = subprocess.run([sys.executable, example, "--scale", "150"], capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "fenced write: LeaseLost, nothing sent" in result.stdout
    assert "rejected" in result.stdout and "dead letters: 1" in result.stdout


def test_a_refused_renewal_is_a_loss(conn):
    resource = name("order")
    with fencing.Lease("", resource, holder="worker-r", ttl=1.5) as lease:
        # another session ends the lease behind the holder's back
        assert conn.execute("SELECT fencing.release(%s, 'worker-r', %s)", (resource, lease.token)).fetchone()[0]
        assert lease.lost.wait(1.5)
        assert "refused" in lease._state.reason
        with pytest.raises(fencing.LeaseLost):
            lease.check()


def test_the_loss_comes_at_the_deadline_while_a_renewal_hangs(conn):
    resource = name("order")
    blocker = psycopg.connect("")
    try:
        with fencing.Lease("", resource, holder="worker-h", ttl=1.5) as lease:
            # the lease table locked: the next renewal waits for the lock (a
            # row lock would not hold it: a renewal kept in memory locks no row)
            blocker.execute("LOCK TABLE fencing.resources IN ACCESS EXCLUSIVE MODE")
            assert lease.lost.wait(3)
            late = time.monotonic() - lease.deadline
            assert 0 <= late < 0.5, f"signalled {late:.2f} s after the deadline"
            blocker.rollback()
    finally:
        blocker.close()


def test_a_late_cancel_request_does_not_cancel_the_release(conn, monkeypatch):
    # The loss interrupts the hanging renewal with a cancel request sent
    # without waiting; delivered late (here 0.5 s), it must not land on the
    # release that follows: an interrupted connection is not used again.
    cancel = psycopg.Connection.cancel

    def late_cancel(self):
        time.sleep(0.5)
        cancel(self)
    monkeypatch.setattr(psycopg.Connection, "cancel", late_cancel)
    resource = name("order")
    blocker = psycopg.connect("")
    try:
        lease = fencing.Lease("", resource, holder="worker-l", ttl=1.5)
        lease.acquire()
        blocker.execute("LOCK TABLE fencing.resources IN ACCESS EXCLUSIVE MODE")
        assert lease.lost.wait(3)
        blocker.rollback()            # the renewal ends
        lease._worker.join(3)
        # the release waits for the row while the late request arrives
        blocker.execute("SELECT 1 FROM fencing.resources WHERE resource = %s FOR UPDATE", (resource,))
        result = []
        releasing = threading.Thread(target=lambda: result.append(lease.release()))
        releasing.start()
        time.sleep(1)
        blocker.rollback()
        releasing.join(5)
        # no QueryCanceled: a release, True or False (the renewal that the
        # lock held up may have come in before the server's expiry)
        assert len(result) == 1 and isinstance(result[0], bool)
    finally:
        blocker.close()
    assert not (live(conn, resource) or (None, None, False))[2]


def test_fenced_commits_on_a_connection_without_autocommit(conn):
    other = psycopg.connect("")
    try:
        with fencing.fenced(other, 7000) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'committed' WHERE id = 7")
        assert other.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        other.close()
    assert stored(conn, 7) == 7000
