"""fenced(): the caller's statements in one transaction of their own, with
SET LOCAL fencing.token, committed on exit; 23T01 and 23T02 raised as
StaleTokenError and MissingTokenError."""

from contextlib import contextmanager
from typing import Callable, Iterator, Optional, Union

import psycopg

from . import _sql
from .errors import FencingError, StaleTokenError, count_stale_refusal, translate


def token_of(lease_or_token) -> int:
    """The token of a Lease, a SessionLease or a plain int (from another lock manager)."""
    token = lease_or_token if isinstance(lease_or_token, int) else getattr(lease_or_token, "token", None)
    if isinstance(token, bool) or not isinstance(token, int) or token <= 0:
        raise ValueError(f"fenced() takes a lease or a positive integer token, not {lease_or_token!r}")
    return token


def begin(conn, lease_or_token):
    """(lease or None, token) for a fenced transaction about to start on
    `conn`: LeaseLost if the lease has ended (nothing sent), FencingError if
    `conn` is inside a transaction already (its COMMIT would not be ours)."""
    lease = None if isinstance(lease_or_token, int) else lease_or_token
    token = token_of(lease_or_token)
    if lease is not None:
        lease.check()
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        raise FencingError("fenced() runs its own transaction: commit or roll back the "
                           "connection's open transaction first")
    return lease, token


def on_refusal(error: BaseException, on_stale: Optional[Callable]) -> BaseException:
    """The client's error for `error`, counted and passed to on_stale if stale."""
    mapped = translate(error)
    if isinstance(mapped, StaleTokenError):
        count_stale_refusal()
        if on_stale is not None:
            on_stale(mapped)
    return mapped


@contextmanager
def fenced(conn: psycopg.Connection, lease_or_token: Union[int, object], *,
           on_stale: Optional[Callable[[StaleTokenError], None]] = None) -> Iterator[psycopg.Cursor]:
    """Yields a cursor inside a transaction whose token is the lease's (or the
    plain token given); commits on exit, rolls back on an exception.  With a
    lease, checks it on entry and again before COMMIT and raises LeaseLost
    without sending anything once its deadline has passed.  A stale refusal
    calls on_stale(error) (a dead-letter hook), then raises StaleTokenError."""
    lease, token = begin(conn, lease_or_token)
    try:
        with conn.transaction():
            cursor = conn.cursor()
            cursor.execute(_sql.SET_TOKEN, (str(token),))
            yield cursor
            if lease is not None:
                lease.check()     # raised inside: the transaction rolls back
    except psycopg.Error as e:
        mapped = on_refusal(e, on_stale)
        if mapped is e:
            raise
        raise mapped from e
