"""Bad arguments are refused before anything is sent (no connection is
made: the conninfo names a server that does not exist), and the values
the client accepts: seconds, timedelta, FOREVER; the default identity."""

import asyncio
import datetime
import math
import re
import socket

import pytest

import fencing
import fencing.aio
from fencing import _core, _sql

NOWHERE = "host=/nonexistent/fencing-test port=1 connect_timeout=1"
BAD_WAITS = [(-1, ValueError), (math.nan, ValueError), (-math.inf, ValueError),
             ("5", TypeError), (True, TypeError), ([1], TypeError), (datetime.timedelta(seconds=-1), ValueError)]
BAD_TTLS = [(0, ValueError), (-2, ValueError), (math.nan, ValueError), (math.inf, ValueError),
            ("2", TypeError), (None, TypeError), (False, TypeError)]


@pytest.mark.parametrize("wait,error", BAD_WAITS)
def test_bad_waits(wait, error):
    with pytest.raises(error):
        fencing.Lease(NOWHERE, "r", ttl=1, wait=wait)
    with pytest.raises(error):
        fencing.aio.Lease(NOWHERE, "r", ttl=1, wait=wait)
    with pytest.raises(error):
        fencing.Session(NOWHERE).lease("r", ttl=1, wait=wait)     # raised before any connect
    with pytest.raises(error):
        fencing.leased("job:{id}", ttl=1, wait=wait)


@pytest.mark.parametrize("ttl,error", BAD_TTLS)
def test_bad_ttls(ttl, error):
    with pytest.raises(error):
        fencing.Lease(NOWHERE, "r", ttl=ttl)
    with pytest.raises(error):
        fencing.Election(NOWHERE, "e", ttl=ttl)
    with pytest.raises(error):
        fencing.aio.Election(NOWHERE, "e", ttl=ttl)
    with pytest.raises(error):
        fencing.Session(NOWHERE).lease("r", ttl=ttl)


def test_bad_names():
    for resource, error in ((None, TypeError), (7, TypeError), ("", ValueError)):
        with pytest.raises(error):
            fencing.Lease(NOWHERE, resource, ttl=1)
        with pytest.raises(error):
            fencing.Election(NOWHERE, resource, ttl=1)
    for holder, error in ((7, TypeError), ("", ValueError), (b"h", TypeError)):
        with pytest.raises(error):
            fencing.Lease(NOWHERE, "r", holder=holder, ttl=1)
        with pytest.raises(error):
            fencing.Session(NOWHERE, holder=holder)
        with pytest.raises(error):
            fencing.Election(NOWHERE, "e", holder, ttl=1)
    with pytest.raises(TypeError):
        fencing.leased(42, ttl=1)


def test_accepted_seconds():
    lease = fencing.Lease(NOWHERE, "r", ttl=datetime.timedelta(milliseconds=1500),
                          wait=datetime.timedelta(minutes=2))
    assert (lease.ttl, lease.wait) == (1.5, 120.0)
    assert fencing.Lease(NOWHERE, "r", ttl=2, wait=fencing.FOREVER).wait == math.inf
    assert fencing.Lease(NOWHERE, "r", ttl=2, wait=math.inf).wait == math.inf
    assert fencing.Lease(NOWHERE, "r", ttl=2, wait=0).wait == 0
    assert fencing.Lease(NOWHERE, "r", ttl=2).wait is None
    assert fencing.FOREVER == math.inf


def test_a_bad_argument_to_a_decorated_function_sends_nothing():
    @fencing.leased("job:{order_id}", ttl=1, conninfo=NOWHERE)
    def pay(order_id):
        raise AssertionError("not called")
    with pytest.raises(TypeError):
        pay()                      # no order_id: the key cannot be made
    with pytest.raises(TypeError):
        pay(1, 2)

    @fencing.leased("job:{missing}", ttl=1, conninfo=NOWHERE)
    def other(order_id):
        raise AssertionError("not called")
    with pytest.raises(TypeError, match="missing"):
        other(1)


def test_nothing_is_sent_for_a_bad_argument_in_asyncio():
    async def main():
        with pytest.raises(ValueError):
            await fencing.aio.Session(NOWHERE).lease("r", ttl=1, wait=-1)
        with pytest.raises(TypeError):
            await fencing.aio.Session(NOWHERE).lease("r", ttl="1")
    asyncio.run(main())


HOLDER = re.compile(r"^(?P<host>[^:]*):(?P<pid>\d+):(?P<random>[0-9a-f]{8})$")


def test_default_identity():
    one, two = fencing.default_holder(), fencing.default_holder()
    match = HOLDER.match(one)
    assert match and one != two
    assert socket.gethostname().startswith(match.group("host"))
    assert int(match.group("pid")) == __import__("os").getpid()
    assert fencing.Lease(NOWHERE, "r", ttl=1).holder.startswith(match.group("host") + ":")
    assert HOLDER.match(fencing.Session(NOWHERE).holder)
    assert HOLDER.match(fencing.Election(NOWHERE, "e", ttl=1).candidate)
    assert fencing.Lease(NOWHERE, "r", holder="worker-A", ttl=1).holder == "worker-A"


def test_a_long_hostname_is_cut_to_45_bytes(monkeypatch):
    monkeypatch.setattr(socket, "gethostname", lambda: "h\u00e9" * 40)     # 3 bytes a pair
    holder = fencing.default_holder()
    assert len(holder.encode()) <= 45 and HOLDER.match(holder)
    assert holder.split(":")[0].startswith("h\u00e9h\u00e9")


def test_the_retry_floor_is_50_ms():
    assert _core.retry_interval(0.1) == 0.05
    assert _core.retry_interval(3) == 0.3
    assert _core.retry_interval(60) == 1.0


def test_unsupported_server_messages():
    assert _sql.unsupported("0.4.0") is None and _sql.unsupported("0.10.1") is None
    old = _sql.unsupported("0.3.0")
    assert isinstance(old, fencing.UnsupportedServer) and "ALTER EXTENSION fencing UPDATE" in str(old)
    assert "CREATE EXTENSION fencing" in str(_sql.unsupported(None))


def test_busy_is_not_a_timeout():
    assert not issubclass(fencing.LeaseBusy, fencing.LeaseTimeout)
    assert not issubclass(fencing.LeaseTimeout, fencing.LeaseBusy)
    assert isinstance(_core.not_granted("r", None), fencing.LeaseBusy)
    assert isinstance(_core.not_granted("r", 0), fencing.LeaseBusy)
    assert isinstance(_core.not_granted("r", 2.0), fencing.LeaseTimeout)
    assert issubclass(fencing.StaleTokenError, fencing.RefusedWriteError)
    assert issubclass(fencing.MissingTokenError, fencing.RefusedWriteError)


def test_the_worker_is_not_in_the_package():
    from importlib import metadata
    try:
        dist = metadata.distribution("fencing")
    except metadata.PackageNotFoundError:
        dist = None
    if dist is None or dist.read_text("RECORD") is None:      # a source tree's egg-info
        pytest.skip("the client is not installed from its wheel")
    names = [str(f) for f in dist.files]
    assert any(n.endswith("fencing/lease.py") for n in names)
    assert not any("conformance" in n for n in names), names
    assert not any(n.startswith("tools/") or "unasync" in n for n in names), names


def test_the_fenced_transaction_is_bounded_by_the_lease():
    from types import SimpleNamespace

    from fencing._fenced import opening

    def conn(version):
        return SimpleNamespace(info=SimpleNamespace(server_version=version))
    lease = SimpleNamespace(remaining=lambda: 2.0004)
    sql, params = opening(conn(150004), lease, 42)
    assert "idle_in_transaction_session_timeout" in sql and "transaction_timeout'" not in sql
    assert params == ("42", "2001")
    sql, params = opening(conn(170002), lease, 42)
    assert "set_config('transaction_timeout', %s, true)" in sql and params == ("42", "2001", "2001")
    expired = SimpleNamespace(remaining=lambda: -3.0)
    assert opening(conn(150004), expired, 42)[1] == ("42", "1")       # at least 1 ms (0 would disable it)
    sql, params = opening(conn(170002), None, 42)                      # a plain token: nothing bounded
    assert "timeout" not in sql and params == ("42",)
