"""The keepalive connection's options: its name, and timeouts within the
lease that the caller's conninfo can override."""

from types import SimpleNamespace

from fencing._sql import keepalive_options


def lease(ttl, remaining=None):
    return SimpleNamespace(ttl=ttl, deadline=None if remaining is None else 1.0,
                           remaining=lambda: remaining)


def test_name_and_timeouts_from_the_shortest_ttl():
    options = keepalive_options("host=db", "worker-A", [lease(10, 7.2), lease(3, 2.5)])
    assert options["application_name"] == "fencing keepalive worker-A"
    assert options["autocommit"] is True
    assert options["connect_timeout"] == 3              # what is left, rounded up
    assert options["tcp_user_timeout"] == 1000          # a third of 3 s
    assert options["keepalives_idle"] == 1


def test_before_the_grant_the_ttl_bounds_the_connect():
    assert keepalive_options("", "h", [lease(30)])["connect_timeout"] == 30
    assert keepalive_options("", "h", [])["connect_timeout"] == 10
    assert keepalive_options("", "h", [lease(1, 0.1)])["connect_timeout"] == 2   # libpq's least


def test_the_callers_conninfo_wins():
    options = keepalive_options("connect_timeout=9 tcp_user_timeout=0", "h", [lease(3, 3)])
    assert "connect_timeout" not in options and "tcp_user_timeout" not in options
    assert options["keepalives"] == 1
