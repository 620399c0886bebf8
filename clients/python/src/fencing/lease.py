"""Lease and Session: leases of fencing.acquire(), kept alive by a thread on
a connection of their own (never the caller's), renewed at a third of the
ttl, lost at the deadline of the last acknowledged call."""

import logging
import threading
import time
from typing import Dict, List, Optional

import psycopg

from . import _sql
from ._deadline import Deadline
from .errors import LeaseAlreadyHeld, LeaseLost, LeaseTimeout

log = logging.getLogger("fencing")


def acquire_token(conn: psycopg.Connection, resource: str, holder: str, ttl: float,
                  wait: Optional[float]) -> int:
    """One grant on `conn` (autocommit): the token, or LeaseTimeout or
    LeaseAlreadyHeld (the server's NOTICE 01T01; a query of fencing.leases
    on an extension older than 0.4.0, which sends none)."""
    with _sql.OwnLeaseNotices(conn) as notices:
        if wait:
            try:
                token = conn.execute(_sql.ACQUIRE_WAIT, (resource, holder, ttl, wait)).fetchone()[0]
            except psycopg.errors.UndefinedFunction:
                token = _poll(conn, resource, holder, ttl, time.monotonic() + wait)
        else:
            token = conn.execute(_sql.ACQUIRE, (resource, holder, ttl)).fetchone()[0]
    if token is None:
        if notices.token is not None:
            raise already_held(resource, holder, notices.token)
        _raise_not_granted(conn, resource, holder, wait)
    return token


def _poll(conn, resource, holder, ttl, until) -> Optional[int]:
    """acquire(..., wait) of an extension that has none: tries until `until`."""
    while True:
        token = conn.execute(_sql.ACQUIRE, (resource, holder, ttl)).fetchone()[0]
        if token is not None or time.monotonic() >= until:
            return token
        _raise_if_own(conn, resource, holder)
        time.sleep(min(_sql.POLL_INTERVAL, max(0.0, until - time.monotonic())))


def _raise_if_own(conn, resource, holder) -> None:
    row = conn.execute(_sql.OWN_LEASE, (resource, holder)).fetchone()
    if row is not None:
        raise already_held(resource, holder, row[0])


def _raise_not_granted(conn, resource, holder, wait) -> None:
    _raise_if_own(conn, resource, holder)
    raise not_granted(resource, wait)


def already_held(resource: str, holder: str, token: int) -> LeaseAlreadyHeld:
    return LeaseAlreadyHeld(f"{holder} already holds the lease on {resource} (token {token})", token)


def not_granted(resource: str, wait: Optional[float]) -> LeaseTimeout:
    if wait:
        return LeaseTimeout(f"the lease on {resource} was not granted within {wait} s")
    return LeaseTimeout(f"the lease on {resource} is held by another holder")


def retry_interval(ttl: float) -> float:
    """How soon a failed renewal is tried again (until the deadline)."""
    return max(0.05, min(1.0, ttl / 10))


def _close_quietly(conn: Optional[psycopg.Connection]) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:   # closing a broken connection
            pass


def _cancel_quietly(conn: Optional[psycopg.Connection]) -> None:
    """Cancels a call in flight from another thread, without waiting for it."""
    if conn is None or conn.closed:
        return

    def cancel():
        try:
            conn.cancel()
        except Exception:
            pass
    threading.Thread(target=cancel, daemon=True).start()


class LeaseBase:
    """What every lease shows, threaded or asyncio, own or a session's:
    `token`, `lost`, `deadline`, `remaining()`, `check()`."""

    token: Optional[int] = None
    resource: str
    _state: Optional[Deadline] = None

    @property
    def lost(self):
        """Set when the lease ends: its deadline passed, a renewal was
        refused, or it was released (threading.Event; asyncio.Event in fencing.aio)."""
        return self._state.lost

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


class Lease(LeaseBase):
    """A lease on one resource (context manager).  `token` is its fencing
    token; `lost` is set when it ends (deadline passed, renewal refused, or
    released); `deadline` is on time.monotonic(); `check()` raises LeaseLost
    once it has ended.  `wait` (seconds) waits for a busy lease; without it,
    a busy lease raises LeaseTimeout at once."""

    def __init__(self, conninfo: str, resource: str, *, holder: str, ttl: float,
                 wait: Optional[float] = None):
        _sql.check_arguments(ttl, wait)
        self.conninfo = conninfo
        self.resource = resource
        self.holder = holder
        self.ttl = ttl
        self.wait = wait
        self._state = Deadline(ttl, on_lost=self._cancel_call)
        self._conn: Optional[psycopg.Connection] = None
        self._in_call = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._released = False

    def __enter__(self) -> "Lease":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def acquire(self) -> int:
        conn = self._connection()
        start = time.monotonic()
        try:
            self.token = acquire_token(conn, self.resource, self.holder, self.ttl, self.wait)
            if time.monotonic() - start > self.ttl / 3:
                # a long wait: the grant's deadline counts from the call's
                # start, so renew at once to hold it for a full ttl
                start = time.monotonic()
                if not conn.execute(_sql.RENEW, (self.resource, self.holder, self.token,
                                                 self.ttl)).fetchone()[0]:
                    raise LeaseLost(f"lease on {self.resource} lost right after its grant")
        except BaseException:
            self._stop.set()
            _close_quietly(self._conn)
            self._conn = None
            raise
        self._state.acknowledge(start)
        self._thread = threading.Thread(target=self._keepalive, daemon=True,
                                        name=f"fencing keepalive {self.resource}")
        self._thread.start()
        return self.token

    def release(self) -> bool:
        """Stops the keepalive and releases the lease (also after a loss);
        True if the server still had it.  Never raises for a failed release:
        the lease then ends at its expiry."""
        if self._released or self.token is None:
            return False
        self._released = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.ttl)
            if self._thread.is_alive():   # stuck in a renewal: release elsewhere
                _cancel_quietly(self._conn)
                self._conn = None
        released = False
        try:
            conn = self._connection()
            released = bool(conn.execute(_sql.RELEASE, (self.resource, self.holder, self.token)).fetchone()[0])
        except psycopg.Error as e:
            log.warning("fencing: release of %s failed (it expires at its ttl): %s", self.resource, e)
        finally:
            self._state.lose("released")
            _close_quietly(self._conn)
            self._conn = None
        return released

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            _close_quietly(self._conn)
            self._conn = psycopg.connect(self.conninfo, **_sql.keepalive_options(
                self.conninfo, self.holder, [self]))
        return self._conn

    def _cancel_call(self) -> None:
        if self._in_call:
            _cancel_quietly(self._conn)

    def _keepalive(self) -> None:
        retry = retry_interval(self.ttl)
        due = self._state.last_start + self.ttl / 3
        while not self._stop.wait(max(0.0, due - time.monotonic())):
            if self._state.expired():
                return
            start = time.monotonic()
            conn = None
            try:
                self._in_call = True
                conn = self._connection()
                renewed = conn.execute(_sql.RENEW, (self.resource, self.holder, self.token,
                                                    self.ttl)).fetchone()[0]
            except psycopg.Error as e:
                log.info("fencing: renewal of %s failed, retrying until the deadline: %s", self.resource, e)
                _close_quietly(conn)
                if self._conn is conn:
                    self._conn = None
                due = time.monotonic() + retry
                continue
            finally:
                self._in_call = False
            if not renewed:
                self._state.lose("a renewal was refused: the server no longer has the lease")
                return
            if not self._state.acknowledge(start):
                return
            due = start + self.ttl / 3


class SessionLease(LeaseBase):
    """A lease of a Session: the same `token`, `lost`, `deadline` and
    `check()` as a Lease; kept alive by its session; `release()` (or leaving
    its `with`) releases this one lease."""

    def __init__(self, session: "Session", resource: str, token: int, ttl: float):
        self.session = session
        self.resource = resource
        self.holder = session.holder
        self.token = token
        self.ttl = ttl
        self._state = Deadline(ttl, on_lost=session._cancel_call)

    def release(self) -> bool:
        return self.session.release(self.resource)

    def __enter__(self) -> "SessionLease":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Session:
    """One holder's leases on one keepalive connection: a thread renews them
    all with fencing.renew_all() at a third of the shortest ttl.  Closing the
    session (leaving its `with`) releases every lease it holds."""

    def __init__(self, conninfo: str, *, holder: str):
        self.conninfo = conninfo
        self.holder = holder
        self._leases: Dict[str, SessionLease] = {}
        self._lock = threading.RLock()    # the connection: one call at a time
        self._conn: Optional[psycopg.Connection] = None
        self._in_call = False
        self._wake = threading.Event()
        self._closed = False
        self._thread: Optional[threading.Thread] = None
        self._renew_all_missing = False

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def lease(self, resource: str, *, ttl: float, wait: Optional[float] = None) -> SessionLease:
        """Acquires `resource` for this session (waiting up to `wait` on a
        connection of its own, so the renewals go on meanwhile)."""
        _sql.check_arguments(ttl, wait)
        if self._closed:
            raise LeaseLost("the session is closed")
        start = time.monotonic()
        if wait:
            with psycopg.connect(self.conninfo, autocommit=True,
                                 application_name=f"fencing acquire {self.holder}") as conn:
                token = acquire_token(conn, resource, self.holder, ttl, wait)
            if time.monotonic() - start > ttl / 3:
                start = time.monotonic()
                with self._lock:
                    if not self._connection().execute(_sql.RENEW, (resource, self.holder, token,
                                                                   ttl)).fetchone()[0]:
                        raise LeaseLost(f"lease on {resource} lost right after its grant")
        else:
            with self._lock:
                token = acquire_token(self._connection(), resource, self.holder, ttl, None)
        lease = SessionLease(self, resource, token, ttl)
        lease._state.acknowledge(start)
        with self._lock:
            self._leases[resource] = lease
            if self._thread is None:
                self._thread = threading.Thread(target=self._keepalive, daemon=True,
                                                name=f"fencing keepalive {self.holder}")
                self._thread.start()
        self._wake.set()
        return lease

    @property
    def leases(self) -> List[SessionLease]:
        with self._lock:
            return list(self._leases.values())

    def release(self, resource: str) -> bool:
        """Releases one lease of the session; True if the server still had it."""
        with self._lock:
            lease = self._leases.pop(resource, None)
            if lease is None:
                return False
            try:
                released = bool(self._connection().execute(
                    _sql.RELEASE, (resource, self.holder, lease.token)).fetchone()[0])
            except psycopg.Error as e:
                log.warning("fencing: release of %s failed (it expires at its ttl): %s", resource, e)
                self._drop_connection()
                released = False
        lease._state.lose("released")
        return released

    def close(self) -> None:
        """Releases every lease and closes the keepalive connection."""
        if self._closed:
            return
        for resource in list(self._leases):
            self.release(resource)
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            self._drop_connection()

    def _connection(self) -> psycopg.Connection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._drop_connection()
            self._conn = psycopg.connect(self.conninfo, **_sql.keepalive_options(
                self.conninfo, self.holder, self._leases.values()))
        return self._conn

    def _drop_connection(self) -> None:
        _close_quietly(self._conn)
        self._conn = None

    def _cancel_call(self) -> None:
        if self._in_call:
            _cancel_quietly(self._conn)

    def _keepalive(self) -> None:
        retry_at = None
        while not self._closed:
            live = [lease for lease in self.leases if not lease._state.expired()]
            if not live:
                self._wake.wait()
                self._wake.clear()
                continue
            due = min(lease._state.last_start + lease.ttl / 3 for lease in live)
            if retry_at is not None:
                due = retry_at
            if self._wake.wait(max(0.0, due - time.monotonic())):
                self._wake.clear()
                continue
            live = [lease for lease in live if not lease._state.expired()]
            if not live or self._closed:
                continue
            start = time.monotonic()
            try:
                results = self._renew(live)
            except psycopg.Error as e:
                log.info("fencing: renewal of %s's leases failed, retrying until their deadlines: %s",
                         self.holder, e)
                with self._lock:
                    self._drop_connection()
                retry_at = time.monotonic() + min(retry_interval(lease.ttl) for lease in live)
                continue
            retry_at = None
            for lease in live:
                if results.get((lease.resource, lease.token)):
                    lease._state.acknowledge(start)
                elif lease.resource in self._leases:
                    lease._state.lose("a renewal was refused: the server no longer has the lease")

    def _renew(self, live: List[SessionLease]) -> dict:
        """{(resource, token): renewed} for `live`, one renew_all() per ttl."""
        by_ttl: Dict[float, List[SessionLease]] = {}
        for lease in live:
            by_ttl.setdefault(lease.ttl, []).append(lease)
        results = {}
        with self._lock:
            self._in_call = True
            try:
                conn = self._connection()
                for ttl, group in by_ttl.items():
                    if not self._renew_all_missing:
                        try:
                            rows = conn.execute(_sql.RENEW_ALL, (
                                self.holder, ttl, [lease.resource for lease in group],
                                [lease.token for lease in group])).fetchall()
                            results.update({(r, t): renewed for r, t, renewed in rows})
                            continue
                        except psycopg.errors.UndefinedFunction:
                            self._renew_all_missing = True   # an older extension
                    for lease in group:
                        results[(lease.resource, lease.token)] = conn.execute(
                            _sql.RENEW, (lease.resource, self.holder, lease.token, ttl)).fetchone()[0]
            finally:
                self._in_call = False
        return results
