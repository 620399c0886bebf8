"""fencing: leases of the fencing PostgreSQL extension, kept alive on a
connection of their own, and writes fenced with their token.

    import fencing
    with fencing.Lease(conninfo, "order:101", holder="worker-A", ttl=10, wait=30) as lease:
        with fencing.fenced(conn, lease) as cur:
            cur.execute("UPDATE orders SET status = 'paid' WHERE id = 101")

fencing.aio has the same for asyncio."""

from .errors import (FencingError, LeaseAlreadyHeld, LeaseError, LeaseLost, LeaseTimeout,
                     MissingTokenError, RefusedWriteError, StaleTokenError, parse_detail,
                     stale_refusals, translate)
from .fenced import fenced
from .lease import Lease, Session, SessionLease
from . import aio  # noqa: E402  (fencing.aio after the names it uses)

__all__ = [
    "FencingError", "LeaseAlreadyHeld", "LeaseError", "LeaseLost", "LeaseTimeout", "MissingTokenError",
    "RefusedWriteError", "StaleTokenError", "parse_detail", "stale_refusals", "translate", "fenced",
    "Lease", "Session", "SessionLease", "aio",
]
__version__ = "0.4.0"
