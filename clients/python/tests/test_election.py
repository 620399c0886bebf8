"""fencing.Election and fencing.aio.Election against a real server (skipped
without one): one leader in order, leader() agrees with fencing.leader(),
resign hands over, callbacks, observe without polling, recampaign, and the
leader's writes fenced."""

import asyncio
import threading
import time

import pytest

import fencing
import fencing.aio

from _server import TABLE, cancel_a_wait, conn, name, stored, wait_until, waiters  # noqa: F401


def recorder():
    events, lock = [], threading.Lock()

    def add(*event):
        with lock:
            events.append(event)
    return events, dict(on_started_leading=lambda token: add("started", token),
                        on_stopped_leading=lambda: add("stopped"),
                        on_new_leader=lambda holder, token: add("new_leader", holder, token))


def server_leader(conn, election):
    return conn.execute("SELECT holder, token FROM fencing.leader(%s)", (election,)).fetchone()


def test_one_leader_in_order_and_resign_hands_over(conn):
    election = name("election")
    events_a, callbacks_a = recorder()
    a = fencing.Election("", election, ttl=2, **callbacks_a)
    b = fencing.Election("", election, ttl=2)
    token_a = a.campaign(wait=0)
    assert a.is_leader and a.token == token_a
    assert server_leader(conn, election) == (a.candidate, token_a)
    assert a.leader() == b.leader() == (a.candidate, token_a)
    with pytest.raises(fencing.LeaseBusy):
        b.campaign(wait=None)
    waiting = threading.Thread(target=b.campaign, daemon=True)     # waits FOREVER by default
    waiting.start()
    assert wait_until(lambda: len(waiters(conn, f"fencing keepalive {b.candidate}")) == 1)
    time.sleep(1)                       # the leader renews meanwhile
    assert a.is_leader and not b.is_leader
    with fencing.fenced(conn, a) as cur:
        cur.execute(f"UPDATE {TABLE} SET status = 'led' WHERE id = 11")
    assert stored(conn, 11) == token_a
    with pytest.raises(fencing.LeaseLost):          # not the leader: nothing sent
        with fencing.fenced(conn, b):
            pass
    resigned = time.monotonic()
    assert a.resign() is True
    waiting.join(30)
    assert b.is_leader and b.token > token_a and time.monotonic() - resigned < 5
    assert server_leader(conn, election) == (b.candidate, b.token)
    assert not a.is_leader and a.resign() is False
    assert events_a == [("started", token_a), ("stopped",)]
    b.close()
    assert server_leader(conn, election) is None and b.leader() is None
    a.close()


def test_observe_sees_every_change_in_order(conn):
    election = name("observed")
    events, callbacks = recorder()
    observer = fencing.Election("", election, ttl=2, **callbacks)
    observer.observe()
    a, b = fencing.Election("", election, ttl=2), fencing.Election("", election, ttl=2)
    try:
        token_a = a.campaign()
        assert wait_until(lambda: ("new_leader", a.candidate, token_a) in events, 10)
        thread = threading.Thread(target=b.campaign, daemon=True)
        thread.start()
        assert wait_until(lambda: len(waiters(conn, f"fencing keepalive {b.candidate}")) == 1)
        a.resign()
        thread.join(30)
        assert wait_until(lambda: ("new_leader", b.candidate, b.token) in events, 10)
        b.resign()
        assert wait_until(lambda: events[-1] == ("new_leader", None, None), 10)
        named = [e for e in events if e[0] == "new_leader" and e[1] is not None]
        assert named == [("new_leader", a.candidate, token_a), ("new_leader", b.candidate, b.token)]
        assert not any(e[0] in ("started", "stopped") for e in events)     # it never campaigned
    finally:
        for one in (observer, a, b):
            one.close()


def test_an_expiry_without_successor_is_observed_at_the_deadline(conn):
    election = name("expiry")
    events, callbacks = recorder()
    observer = fencing.Election("", election, ttl=1, **callbacks)
    leader = fencing.Election("", election, ttl=1)
    try:
        observer.observe()
        token = leader.campaign()
        assert wait_until(lambda: ("new_leader", leader.candidate, token) in events, 10)
        # the leadership ends behind the leader's back but stays until its expiry:
        # fencing.renew refuses nothing yet, so end it by stopping the keepalive
        leader._lease._stop.set()
        assert wait_until(lambda: events[-1] == ("new_leader", None, None), 10)
    finally:
        observer.close()
        leader.close()


def lose_and_lead_again(conn, election, a, events):
    """a leads, loses (its lease released behind its back), leads again."""
    first = a.campaign()
    conn.execute("SELECT fencing.release(%s, %s, %s)", (election, a.candidate, first))
    assert wait_until(lambda: [e[0] for e in events] == ["started", "stopped", "started"], 15)
    assert a.is_leader and a.token > first


def test_recampaign_after_a_loss(conn):
    election = name("again")
    events, callbacks = recorder()
    a = fencing.Election("", election, ttl=1.5, recampaign=True, **callbacks)
    try:
        lose_and_lead_again(conn, election, a, events)
        assert server_leader(conn, election) == (a.candidate, a.token)
    finally:
        a.close()
    assert server_leader(conn, election) is None
    assert events[-1] == ("stopped",)


def test_recampaign_retries_a_failed_campaign(conn, monkeypatch):
    # The leadership is often lost because the server went away: the
    # campaign right after the loss fails too, and the election must try again.
    import psycopg
    import fencing.lease
    election = name("again_fail")
    events, callbacks = recorder()
    real = fencing.lease.Lease.acquire
    calls = []

    def acquire(self):
        calls.append(time.monotonic())
        if len(calls) in (2, 3):
            raise psycopg.OperationalError("the server went away (test)")
        return real(self)

    monkeypatch.setattr(fencing.lease.Lease, "acquire", acquire)
    a = fencing.Election("", election, ttl=1.5, recampaign=True, **callbacks)
    try:
        lose_and_lead_again(conn, election, a, events)
        assert len(calls) == 4
        assert calls[3] - calls[2] >= 0.05         # not a hot loop: the retry floor at least
    finally:
        a.close()


def test_asyncio_election(conn):
    election = name("aelection")

    async def main():
        events, callbacks = recorder()
        async with fencing.aio.Election("", election, ttl=2, **callbacks) as a:
            await a.observe()
            b = fencing.aio.Election("", election, ttl=2)
            token = await a.campaign()
            assert a.is_leader and await b.leader() == (a.candidate, token)
            task = asyncio.ensure_future(b.campaign())
            for _ in range(600):
                if waiters(conn, f"fencing keepalive {b.candidate}"):
                    break
                await asyncio.sleep(0.05)
            assert await a.resign() is True
            await asyncio.wait_for(task, 30)
            assert b.is_leader and b.token > token
            for _ in range(200):
                if ("new_leader", b.candidate, b.token) in events:
                    break
                await asyncio.sleep(0.05)
            await b.close()
        named = [e for e in events if e[0] == "new_leader" and e[1] is not None]
        assert named == [("new_leader", a.candidate, token), ("new_leader", b.candidate, b.token)]
        assert [e for e in events if e[0] != "new_leader"] == [("started", token), ("stopped",)]
    asyncio.run(main())
    assert server_leader(conn, election) is None


def test_a_cancelled_campaign_leaves_nothing_queued(conn):
    election = name("cancelcampaign")
    with fencing.Election("", election, ttl=2) as leader:
        leader.campaign()
        cancel = threading.Event()
        other = fencing.Election("", election, ttl=2)
        error = cancel_a_wait(conn, lambda: other.campaign(cancel=cancel), cancel, other.candidate)
        assert isinstance(error, fencing.LeaseCancelled) and not other.is_leader
    assert server_leader(conn, election) is None
