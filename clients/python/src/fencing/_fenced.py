"""What fenced() of fencing.lease and fencing.aio share: the checks before
the transaction, the statement that opens it, and the mapping of a refusal."""

import math
from typing import Callable, Optional

import psycopg

from ._sql import MAX_TIMEOUT_MS
from .errors import FencingError, StaleTokenError, count_stale_refusal, translate

SET_TOKEN = "SELECT set_config('fencing.token', %s, true)"
# With a lease: the transaction is bounded by the lease's remaining time, so
# a holder frozen inside it is ended by the server at its deadline instead of
# holding its row locks (and the next holder's write) for as long as it stays
# frozen.  transaction_timeout exists from PostgreSQL 17 on.
SET_TOKEN_BOUNDED = ("SELECT set_config('fencing.token', %s, true), "
                     "set_config('idle_in_transaction_session_timeout', %s, true)")
SET_TOKEN_BOUNDED_17 = SET_TOKEN_BOUNDED + ", set_config('transaction_timeout', %s, true)"


def token_of(lease_or_token) -> int:
    """The token of a Lease, a SessionLease, an Election or a plain int (from another lock manager)."""
    token = lease_or_token if isinstance(lease_or_token, int) else getattr(lease_or_token, "token", None)
    if isinstance(token, bool) or not isinstance(token, int) or token <= 0:
        raise ValueError(f"fenced() takes a lease or a positive integer token, not {lease_or_token!r}")
    return token


def begin(conn, lease_or_token):
    """(lease or None, token) for a fenced transaction about to start on
    `conn`: LeaseLost if the lease has ended (nothing sent), FencingError if
    `conn` is inside a transaction already (its COMMIT would not be ours)."""
    lease = None if isinstance(lease_or_token, int) else lease_or_token
    if lease is not None:
        if not (callable(getattr(lease, "check", None)) and callable(getattr(lease, "remaining", None))):
            raise ValueError(f"fenced() takes a lease or a positive integer token, not {lease!r}")
        lease.check()
    token = token_of(lease_or_token)
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise FencingError("fenced() runs its own transaction: commit or roll back the "
                           "connection's open transaction first")
    return lease, token


def opening(conn, lease, token: int):
    """(sql, params) of the transaction's first statement: the token and,
    with a lease, the timeouts at the lease's remaining milliseconds (>= 1,
    and at most the largest the settings take)."""
    if lease is None:
        return SET_TOKEN, (str(token),)
    left = str(min(max(1, math.ceil(lease.remaining() * 1000)), MAX_TIMEOUT_MS))
    if conn.info.server_version >= 170000:
        return SET_TOKEN_BOUNDED_17, (str(token), left, left)
    return SET_TOKEN_BOUNDED, (str(token), left)


def on_refusal(error: BaseException, on_stale: Optional[Callable]) -> BaseException:
    """The client's error for `error`, counted and passed to on_stale if stale."""
    mapped = translate(error)
    if isinstance(mapped, StaleTokenError):
        count_stale_refusal()
        if on_stale is not None:
            on_stale(mapped)
    return mapped
