"""The SQL the client sends, and the connection options of a keepalive
connection: shared by the threaded client and fencing.aio."""

import math
import re

from psycopg import conninfo as _conninfo

# A try, and the wait of fencing.acquire(resource, holder, ttl, wait).
ACQUIRE = "SELECT fencing.acquire(%s, %s, %s * interval '1 second')"
ACQUIRE_WAIT = "SELECT fencing.acquire(%s, %s, %s * interval '1 second', %s * interval '1 second')"
# Which token a holder that got NULL holds already (LeaseAlreadyHeld).
OWN_LEASE = "SELECT token FROM fencing.leases WHERE resource = %s AND holder = %s AND live"
RENEW = "SELECT fencing.renew(%s, %s, %s, %s * interval '1 second')"
RENEW_ALL = ("SELECT resource, token, renewed FROM "
             "fencing.renew_all(%s, %s * interval '1 second', %s::text[], %s::bigint[])")
RELEASE = "SELECT fencing.release(%s, %s, %s)"
SET_TOKEN = "SELECT set_config('fencing.token', %s, true)"

# The NOTICE of acquire() to a holder that asks for its own live lease:
# 'holder "h" already holds the lease on resource "r" with token N'.
OWN_LEASE_NOTICE = "01T01"
_NOTICE_TOKEN = re.compile(r"with token (\d+)$")
# How often acquire(..., wait) is tried on an extension older than 0.4.0.
POLL_INTERVAL = 0.05


class OwnLeaseNotices:
    """Collects the 01T01 NOTICE of one acquire() call on a connection
    (`with OwnLeaseNotices(conn) as notices:`); `token` is the token it names."""

    def __init__(self, conn):
        self.conn = conn
        self.token = None

    def _handle(self, diagnostic) -> None:
        if diagnostic.sqlstate == OWN_LEASE_NOTICE:
            match = _NOTICE_TOKEN.search(diagnostic.message_primary or "")
            self.token = int(match.group(1)) if match else 0

    def __enter__(self) -> "OwnLeaseNotices":
        self.conn.add_notice_handler(self._handle)
        return self

    def __exit__(self, *exc) -> None:
        self.conn.remove_notice_handler(self._handle)


def application_name(holder: str) -> str:
    return f"fencing keepalive {holder}"


def keepalive_options(conninfo: str, holder: str, leases) -> dict:
    """Keyword arguments for connect() of the keepalive of `leases` (each with
    `ttl`, `deadline`, `remaining()`): autocommit, the keepalive's name and,
    unless the caller's conninfo sets them, a connect timeout within what is
    left of the leases and TCP timeouts of about a third of the shortest ttl,
    so that a connection the network dropped fails (and is replaced) well
    before the deadline instead of hanging until it (ignored on Unix sockets)."""
    given = _conninfo.conninfo_to_dict(conninfo)
    leases = list(leases)
    ttl = min((lease.ttl for lease in leases), default=10)
    left = min((lease.remaining() if lease.deadline is not None else lease.ttl for lease in leases),
               default=ttl)
    third = max(1, math.ceil(ttl / 3))
    defaults = {
        "connect_timeout": max(2, math.ceil(left)),    # libpq takes 2 s at least
        "tcp_user_timeout": third * 1000,
        "keepalives": 1,
        "keepalives_idle": third,
        "keepalives_interval": 1,
        "keepalives_count": 2,
    }
    options = {name: value for name, value in defaults.items() if name not in given}
    options.update(autocommit=True, application_name=application_name(holder))
    return options


def check_arguments(ttl: float, wait) -> None:
    if not ttl or ttl <= 0:
        raise ValueError("ttl must be a positive number of seconds")
    if wait is not None and wait < 0:
        raise ValueError("wait must be None or a number of seconds >= 0")
