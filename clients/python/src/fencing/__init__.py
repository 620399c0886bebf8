"""fencing: leases of the fencing PostgreSQL extension, kept alive on a
connection of their own, and writes fenced with their token.

    import fencing
    with fencing.Lease(conninfo, "order:101", ttl=10, wait=fencing.FOREVER) as lease:
        with fencing.fenced(conn, lease) as cur:
            cur.execute("UPDATE orders SET status = 'paid' WHERE id = 101")

fencing.aio has the same for asyncio (fencing.lease is generated from it)."""

from ._core import FOREVER, default_holder
from .errors import (FencingError, LeaseAlreadyHeld, LeaseBusy, LeaseCancelled, LeaseError, LeaseLost,
                     LeaseTimeout, MissingTokenError, RefusedWriteError, StaleTokenError, UnsupportedServer,
                     parse_detail, stale_refusals, translate)
from .lease import Election, Lease, Session, SessionLease, fenced
from ._leased import leased
from . import aio  # noqa: E402  (fencing.aio after the names it uses)

__all__ = [
    "FOREVER", "default_holder", "FencingError", "LeaseAlreadyHeld", "LeaseBusy", "LeaseCancelled",
    "LeaseError", "LeaseLost", "LeaseTimeout", "MissingTokenError", "RefusedWriteError", "StaleTokenError",
    "UnsupportedServer", "parse_detail", "stale_refusals", "translate", "fenced", "leased", "Election",
    "Lease", "Session", "SessionLease", "aio",
]
__version__ = "0.4.0"
