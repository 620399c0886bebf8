"""The SQL the client sends, and the connection options of a keepalive
connection: shared by the threaded client and fencing.aio."""

import math
import re

from psycopg import conninfo as _conninfo

from .errors import UnsupportedServer

# A cancel request is sent again every CANCEL_RESEND s until the cancelled
# call has ended: PostgreSQL drops one that comes while it still reads the
# call's messages (Parse, Bind, Execute).
CANCEL_RESEND = 0.5

# A try, and the wait of fencing.acquire(resource, holder, ttl, wait).
ACQUIRE = "SELECT fencing.acquire(%s, %s, %s * interval '1 second')"
ACQUIRE_WAIT = "SELECT fencing.acquire(%s, %s, %s * interval '1 second', %s * interval '1 second')"
RENEW = "SELECT fencing.renew(%s, %s, %s, %s * interval '1 second')"
RENEW_ALL = ("SELECT resource, token, renewed FROM "
             "fencing.renew_all(%s, %s * interval '1 second', %s::text[], %s::bigint[])")
RELEASE = "SELECT fencing.release(%s, %s, %s)"
# Elections (an election is a lease on the resource named by the election).
CAMPAIGN = "SELECT fencing.campaign(%s, %s, %s * interval '1 second')"
CAMPAIGN_WAIT = "SELECT fencing.campaign(%s, %s, %s * interval '1 second', %s * interval '1 second')"
RESIGN = "SELECT fencing.resign(%s, %s, %s)"
# The leader, and the seconds until its lease expires by the server's clock.
LEADER = ("SELECT holder, token, extract(epoch FROM expires_at - clock_timestamp())::float8 "
          "FROM fencing.leader(%s)")
LISTEN = "LISTEN fencing_election"
EXTVERSION = "SELECT extversion FROM pg_extension WHERE extname = 'fencing'"
REQUIRED_VERSION = (0, 4, 0)

# The NOTICE of acquire() to a holder that asks for its own live lease:
# 'holder "h" already holds the lease on resource "r" with token N'.
OWN_LEASE_NOTICE = "01T01"
_NOTICE_TOKEN = re.compile(r"with token (\d+)$")
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


# The largest timeout in milliseconds PostgreSQL's settings and libpq's
# options take (an int; a ttl may be up to 366 days): longer ones are cut to it.
MAX_TIMEOUT_MS = 2**31 - 1


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
        # libpq takes 2 s at least; psycopg waits for it in ms (an int)
        "connect_timeout": max(2, min(math.ceil(left), MAX_TIMEOUT_MS // 1000)),
        "tcp_user_timeout": min(third * 1000, MAX_TIMEOUT_MS),
        "keepalives": 1,
        "keepalives_idle": third,
        "keepalives_interval": 1,
        "keepalives_count": 2,
    }
    options = {name: value for name, value in defaults.items() if name not in given}
    options.update(autocommit=True, application_name=application_name(holder))
    return options


class Calls:
    """The SQL of a grant and a release: fencing.acquire/release for a lease,
    fencing.campaign/resign for an election."""

    def __init__(self, try_sql: str, wait_sql: str, release_sql: str):
        self.try_sql, self.wait_sql, self.release_sql = try_sql, wait_sql, release_sql


LEASE_CALLS = Calls(ACQUIRE, ACQUIRE_WAIT, RELEASE)
ELECTION_CALLS = Calls(CAMPAIGN, CAMPAIGN_WAIT, RESIGN)


def parse_version(text) -> tuple:
    parts = []
    for part in str(text).split("."):
        digits = re.match(r"\d+", part)
        parts.append(int(digits.group(0)) if digits else 0)
    return tuple(parts)


def unsupported(extversion):
    """The UnsupportedServer error for the extversion read (None: absent), or None if supported."""

    need = ".".join(map(str, REQUIRED_VERSION))
    if extversion is None:
        return UnsupportedServer(f"the fencing extension is not installed in this database; this client "
                                 f"needs {need} or later (CREATE EXTENSION fencing)")
    if parse_version(extversion) < REQUIRED_VERSION:
        return UnsupportedServer(f"the fencing extension is {extversion}; this client needs {need} or later: "
                                 f"ALTER EXTENSION fencing UPDATE")
    return None
