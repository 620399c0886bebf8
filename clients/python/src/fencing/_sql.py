"""The SQL the client sends, and the connection options of a keepalive
connection: shared by the threaded client and fencing.aio."""

import math

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

# 42883: the server's extension predates acquire(..., wait) or renew_all().
UNDEFINED_FUNCTION = "42883"
# The NOTICE of acquire() to a holder that asks for its own live lease
# names its token; any NOTICE of class other than 00 during a NULL grant
# is read that way.
POLL_INTERVAL = 0.05


def application_name(holder: str) -> str:
    return f"fencing keepalive {holder}"


def keepalive_options(conninfo: str, holder: str, seconds_left: float) -> dict:
    """Keyword arguments for connect(): autocommit, the keepalive's name, and
    a connect timeout within what is left of the lease unless the caller set one."""
    options = {"autocommit": True, "application_name": application_name(holder)}
    if "connect_timeout" not in _conninfo.conninfo_to_dict(conninfo):
        # libpq rounds below 2 s up to 2 s
        options["connect_timeout"] = max(2, math.ceil(seconds_left))
    return options


def check_arguments(ttl: float, wait) -> None:
    if not ttl or ttl <= 0:
        raise ValueError("ttl must be a positive number of seconds")
    if wait is not None and wait < 0:
        raise ValueError("wait must be None or a number of seconds >= 0")
