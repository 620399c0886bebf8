"""What the threaded client (fencing.lease, generated from fencing.aio) and
fencing.aio share that does no I/O: the arguments' checks, the default
identity, the errors of a grant, the loss log line and LeaseBase."""

import datetime
import logging
import math
import os
import secrets
import socket
import weakref
from typing import Optional

from ._deadline import Deadline
from .errors import LeaseAlreadyHeld, LeaseBusy, LeaseError, LeaseLost, LeaseTimeout

log = logging.getLogger("fencing")

FOREVER = math.inf
"""wait=FOREVER (or math.inf): wait until granted, or until cancelled."""

# The longest single server-side wait: a wait longer than this (FOREVER) is
# a series of fencing.acquire(..., wait) calls of at most this each.
WAIT_CHUNK = 3600.0
# How soon a failed renewal is tried again, at least (every client: 50 ms).
RETRY_FLOOR = 0.05
HOLDER_MAX_BYTES = 45


def seconds(value, name: str, *, allow_none: bool = False, allow_forever: bool = False,
            positive: bool = False) -> Optional[float]:
    """`value` (int, float or datetime.timedelta) as float seconds; TypeError
    for another type, ValueError for NaN, a negative number, infinity where
    not allowed (or 0 where `positive`)."""
    if value is None and allow_none:
        return None
    if isinstance(value, datetime.timedelta):
        value = value.total_seconds()
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds or a datetime.timedelta, not {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must be a number of seconds, not NaN")
    if value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be {'> 0' if positive else '>= 0'} seconds, not {value!r}")
    if math.isinf(value) and not allow_forever:
        raise ValueError(f"{name} must be a finite number of seconds")
    return value


def check_lease_arguments(ttl, wait):
    """(ttl, wait) as float seconds: ttl > 0 and finite; wait None (a try),
    0 (a try too), positive or FOREVER."""
    ttl = seconds(ttl, "ttl", positive=True)
    wait = seconds(wait, "wait", allow_none=True, allow_forever=True)
    return ttl, wait


def check_holder(holder: Optional[str]) -> str:
    """The holder given, or the default identity."""
    if holder is None:
        return default_holder()
    if not isinstance(holder, str):
        raise TypeError(f"holder must be a str or None, not {holder!r}")
    if not holder:
        raise ValueError("holder must not be empty (None gives the default identity)")
    return holder


def default_holder() -> str:
    """<host>:<pid>:<8 random hex chars>, at most 45 bytes (the host cut)."""
    suffix = f":{os.getpid()}:{secrets.token_hex(4)}"
    host = socket.gethostname().encode()[:HOLDER_MAX_BYTES - len(suffix)]
    return host.decode(errors="ignore") + suffix


def check_resource(resource) -> str:
    if not isinstance(resource, str):
        raise TypeError(f"resource must be a str, not {resource!r}")
    if not resource:
        raise ValueError("resource must not be empty")
    return resource


def already_held(resource: str, holder: str, token: int) -> LeaseAlreadyHeld:
    return LeaseAlreadyHeld(f"{holder} already holds the lease on {resource} (token {token})", token)


def not_granted(resource: str, wait: Optional[float]) -> LeaseError:
    if wait:
        return LeaseTimeout(f"the lease on {resource} was not granted within {wait} s")
    return LeaseBusy(f"the lease on {resource} is held by another holder")


def retry_interval(ttl: float) -> float:
    """How soon a failed renewal is tried again (until the deadline)."""
    return max(RETRY_FLOOR, min(1.0, ttl / 10))


def log_loss(resource: str, holder: str, token: Optional[int], reason: str) -> None:
    log.warning("fencing: lease on %s lost (holder %s, token %s): %s", resource, holder, token, reason)


RELEASED = "released"


class LeaseBase:
    """What every lease shows, threaded or asyncio, own or a session's:
    `holder`, `token`, `lost`, `deadline`, `remaining()`, `check()`."""

    token: Optional[int] = None
    resource: str
    holder: str
    _state: Optional[Deadline] = None

    def _signal_loss(self) -> None:
        """The Deadline's on_lost: logs a loss (not a release)."""
        if self._state is not None and self._state.reason != RELEASED:
            log_loss(self.resource, self.holder, self.token, self._state.reason)

    @property
    def lost(self):
        """Set when the lease ends: its deadline passed, a renewal was
        refused, or it was released (threading.Event; asyncio.Event in fencing.aio)."""
        return self._state.lost if self._state else None

    @property
    def deadline(self) -> Optional[float]:
        """The end of the lease on time.monotonic(): the start of its last
        acknowledged call (grant or renewal) + ttl."""
        return self._state.deadline if self._state else None

    def remaining(self) -> float:
        """Seconds until the deadline (negative once passed)."""
        return self._state.remaining() if self._state else 0.0

    def check(self) -> None:
        """Raises LeaseLost unless the lease is held now, by the clock."""
        if self._state is None or self.token is None or self._state.expired():
            reason = self._state.reason if self._state and self._state.reason else "not acquired"
            raise LeaseLost(f"lease on {self.resource} lost: {reason}")


# Connections a cancel request was sent at without waiting for the call to
# end (a loss, a stuck release): the request may reach the server only after
# that call has ended and cancel the next statement, so such a connection is
# never used again.
_interrupted: "weakref.WeakSet" = weakref.WeakSet()


def mark_interrupted(conn) -> None:
    _interrupted.add(conn)


def reusable(conn) -> bool:
    """False for no connection, a closed or broken one, or one interrupted."""
    return conn is not None and not conn.closed and not conn.broken and conn not in _interrupted
