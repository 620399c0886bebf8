"""fencing for asyncio: Lease, Session, Election and fenced() on psycopg's
AsyncConnection, kept alive by a task; `lost` is an asyncio.Event.

    async with fencing.aio.Lease(conninfo, "order:101", ttl=10, wait=fencing.FOREVER) as lease:
        async with fencing.aio.fenced(conn, lease) as cur:
            await cur.execute("UPDATE orders SET status = 'paid' WHERE id = 101")

This module is the only copy of the client's logic: tools/unasync.py writes
the threaded client, fencing/lease.py, from it (async/await removed,
_aio_compat swapped for _sync_compat), and a test checks that the committed
lease.py is what the tool writes.
"""

import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, Dict, List, Optional, Tuple

import psycopg

from . import _aio_compat as _compat
from . import _sql
from ._core import (FOREVER, RELEASED, WAIT_CHUNK, LeaseBase, already_held, check_holder,
                    check_lease_arguments, check_resource, log, not_granted, retry_interval, reusable,
                    seconds)
from ._fenced import begin, on_refusal, opening
from .errors import (FencingError, LeaseAlreadyHeld, LeaseBusy, LeaseCancelled, LeaseError, LeaseLost,
                     LeaseTimeout, MissingTokenError, StaleTokenError)

__all__ = ["Lease", "Session", "SessionLease", "Election", "fenced", "FOREVER", "FencingError",
           "LeaseAlreadyHeld", "LeaseBusy", "LeaseCancelled", "LeaseLost", "LeaseTimeout",
           "MissingTokenError", "StaleTokenError"]


async def acquire_token(conn, calls: _sql.Calls, resource: str, holder: str, ttl: float,
                        wait: Optional[float], cancel=None) -> int:
    """One grant on `conn` (autocommit): the token, or LeaseBusy (a try),
    LeaseTimeout (a wait that passed), LeaseAlreadyHeld (the server's NOTICE
    01T01), LeaseCancelled.  A wait longer than an hour (FOREVER) is a
    series of server-side waits of an hour at most, never a client's poll."""
    with _sql.OwnLeaseNotices(conn) as notices:
        if not wait:
            token = await _compat.one(conn, calls.try_sql, (resource, holder, ttl))
        else:
            until = time.monotonic() + wait
            while True:
                chunk = min(WAIT_CHUNK, max(0.0, until - time.monotonic()))
                token = await _compat.wait_call(
                    conn, calls.wait_sql, (resource, holder, ttl, chunk), cancel,
                    lambda granted: _compat.one(conn, calls.release_sql, (resource, holder, granted)))
                if token is not None or notices.token is not None or time.monotonic() >= until:
                    break
    if token is None:
        if notices.token is not None:
            raise already_held(resource, holder, notices.token)
        raise not_granted(resource, wait)
    return token


class Lease(LeaseBase):
    """A lease on one resource (`async with`, or acquire() and release()).
    `holder` is the identity used (the default one if none was given),
    `token` its fencing token; `lost` is set when it ends (deadline passed,
    renewal refused, released); `deadline` is on time.monotonic();
    `check()` raises LeaseLost once it has ended.  `wait` (seconds, a
    timedelta, or FOREVER) waits in line for a busy lease; without it a busy
    lease raises LeaseBusy at once.  `cancel` (an Event) ends a wait."""

    def __init__(self, conninfo: str, resource: str, *, holder: Optional[str] = None, ttl,
                 wait=None, cancel=None, _calls: _sql.Calls = _sql.LEASE_CALLS):
        self.ttl, self.wait = check_lease_arguments(ttl, wait)
        self.conninfo = conninfo
        self.resource = check_resource(resource)
        self.holder = check_holder(holder)
        self.cancel = cancel
        self._calls = _calls
        self._conn = None
        self._in_call = False
        self._stop = None
        self._worker = None
        self._released = False
        self._lost_callbacks: List[Callable[[], None]] = []

    async def __aenter__(self) -> "Lease":
        await self.acquire()
        return self

    async def __aexit__(self, kind, error, trace) -> None:
        try:
            await self.release()
        except psycopg.Error as e:
            if error is None:
                raise
            log.warning("fencing: release of %s failed (it expires at its ttl): %s", self.resource, e)

    async def acquire(self) -> int:
        if self._state is not None:
            raise LeaseError("a Lease is acquired once: make a new one")
        self._state = _compat.new_deadline(self.ttl, self._on_lost)
        self._stop = _compat.new_event()
        try:
            conn = await self._connection()
            start = time.monotonic()
            self.token = await acquire_token(conn, self._calls, self.resource, self.holder, self.ttl,
                                             self.wait, self.cancel)
            if time.monotonic() - start > self.ttl / 3:
                # a long wait: the grant's deadline counts from the call's
                # start, so renew at once to hold it for a full ttl
                start = time.monotonic()
                if not await _compat.one(conn, _sql.RENEW, (self.resource, self.holder, self.token, self.ttl)):
                    raise LeaseLost(f"lease on {self.resource} lost right after its grant")
        except BaseException:
            self._stop.set()
            await _compat.close_quietly(self._conn)
            self._conn = None
            raise
        self._state.acknowledge(start)
        self._worker = _compat.spawn(self._keepalive, f"fencing keepalive {self.resource}")
        return self.token

    async def release(self) -> bool:
        """Stops the keepalive and releases the lease (also after a loss):
        True if the server had it and released it, False if it was lost
        already.  A network error is raised (the lease then ends at its ttl)."""
        if self._released or self.token is None:
            return False
        self._released = True
        self._stop.set()
        if not await _compat.join(self._worker, self.ttl):
            _compat.interrupt(self._conn)     # stuck in a renewal: release elsewhere
            self._conn = None
        try:
            conn = await self._connection()
            return bool(await _compat.one(conn, self._calls.release_sql, (self.resource, self.holder, self.token)))
        finally:
            self._state.lose(RELEASED)
            await _compat.close_quietly(self._conn)
            self._conn = None

    async def _connection(self):
        if not reusable(self._conn):
            await _compat.close_quietly(self._conn)
            self._conn = await _compat.connect(self.conninfo, **_sql.keepalive_options(
                self.conninfo, self.holder, [self]))
        return self._conn

    def _on_lost(self) -> None:
        self._signal_loss()
        if self._in_call:
            _compat.interrupt(self._conn)
        for callback in self._lost_callbacks:
            callback()

    async def _keepalive(self) -> None:
        retry = retry_interval(self.ttl)
        due = self._state.last_start + self.ttl / 3
        while not await _compat.wait_event(self._stop, due - time.monotonic()):
            if self._state.expired():
                return
            start = time.monotonic()
            conn = None
            try:
                self._in_call = True
                conn = await self._connection()
                renewed = await _compat.one(conn, _sql.RENEW, (self.resource, self.holder, self.token, self.ttl))
            except psycopg.Error as e:
                log.info("fencing: renewal of %s failed, retrying until the deadline: %s", self.resource, e)
                await _compat.close_quietly(conn)
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
        self._state = _compat.new_deadline(ttl, self._on_lost)

    def _on_lost(self) -> None:
        self._signal_loss()
        self.session._cancel_call()

    async def release(self) -> bool:
        return await self.session.release(self.resource)

    async def __aenter__(self) -> "SessionLease":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.release()


class Session:
    """One holder's leases (each with its own ttl) on one keepalive
    connection, renewed together with fencing.renew_all() at a third of the
    shortest ttl held.  Closing the session (leaving its `with`) releases
    every lease it holds."""

    def __init__(self, conninfo: str, *, holder: Optional[str] = None):
        self.conninfo = conninfo
        self.holder = check_holder(holder)
        self._leases: Dict[str, SessionLease] = {}
        self._lock = _compat.new_lock()     # the connection: one call at a time
        self._conn = None
        self._in_call = False
        self._wake = _compat.new_event()
        self._closed = False
        self._worker = None

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def leases(self) -> List[SessionLease]:
        return list(self._leases.values())

    async def lease(self, resource: str, *, ttl, wait=None, cancel=None) -> SessionLease:
        """Acquires `resource` for this session with its own `ttl` (waiting
        up to `wait` on a connection of its own, so the renewals go on)."""
        ttl, wait = check_lease_arguments(ttl, wait)
        check_resource(resource)
        if self._closed:
            raise LeaseLost("the session is closed")
        start = time.monotonic()
        if wait:
            conn = await _compat.connect(self.conninfo, autocommit=True,
                                         application_name=f"fencing acquire {self.holder}")
            try:
                start = time.monotonic()
                token = await acquire_token(conn, _sql.LEASE_CALLS, resource, self.holder, ttl, wait, cancel)
            finally:
                await _compat.close_quietly(conn)
            if time.monotonic() - start > ttl / 3:
                start = time.monotonic()
                async with self._lock:
                    if not await _compat.one(await self._connection(), _sql.RENEW,
                                             (resource, self.holder, token, ttl)):
                        raise LeaseLost(f"lease on {resource} lost right after its grant")
        else:
            async with self._lock:
                token = await acquire_token(await self._connection(), _sql.LEASE_CALLS, resource,
                                            self.holder, ttl, None)
        lease = SessionLease(self, resource, token, ttl)
        lease._state.acknowledge(start)
        async with self._lock:
            self._leases[resource] = lease
            if self._worker is None:
                self._worker = _compat.spawn(self._keepalive, f"fencing keepalive {self.holder}")
        self._wake.set()
        return lease

    async def release(self, resource: str) -> bool:
        """Releases one lease of the session: True if the server had it,
        False if it was lost already; a network error is raised."""
        async with self._lock:
            lease = self._leases.pop(resource, None)
            if lease is None:
                return False
            try:
                return bool(await _compat.one(await self._connection(), _sql.RELEASE,
                                              (resource, self.holder, lease.token)))
            except psycopg.Error:
                await self._drop_connection()
                raise
            finally:
                lease._state.lose(RELEASED)

    async def close(self) -> None:
        """Releases every lease and closes the keepalive connection (a
        release that fails is logged: that lease ends at its ttl)."""
        if self._closed:
            return
        for resource in list(self._leases):
            try:
                await self.release(resource)
            except psycopg.Error as e:
                log.warning("fencing: release of %s failed (it expires at its ttl): %s", resource, e)
        self._closed = True
        self._wake.set()
        await _compat.join(self._worker, 5)
        async with self._lock:
            await self._drop_connection()

    async def _connection(self):
        if not reusable(self._conn):
            await self._drop_connection()
            self._conn = await _compat.connect(self.conninfo, **_sql.keepalive_options(
                self.conninfo, self.holder, self._leases.values()))
        return self._conn

    async def _drop_connection(self) -> None:
        await _compat.close_quietly(self._conn)
        self._conn = None

    def _cancel_call(self) -> None:
        if self._in_call:
            _compat.interrupt(self._conn)

    async def _keepalive(self) -> None:
        retry_at = None
        while not self._closed:
            live = [lease for lease in self.leases if not lease._state.expired()]
            if not live:
                await _compat.wait_forever(self._wake)
                self._wake.clear()
                continue
            shortest = min(lease.ttl for lease in live)
            due = retry_at if retry_at is not None else (
                min(lease._state.last_start for lease in live) + shortest / 3)
            if await _compat.wait_event(self._wake, due - time.monotonic()):
                self._wake.clear()
                continue
            live = [lease for lease in live if not lease._state.expired()]
            if not live or self._closed:
                continue
            start = time.monotonic()
            try:
                results = await self._renew(live)
            except psycopg.Error as e:
                log.info("fencing: renewal of %s's leases failed, retrying until their deadlines: %s",
                         self.holder, e)
                async with self._lock:
                    await self._drop_connection()
                retry_at = time.monotonic() + retry_interval(shortest)
                continue
            retry_at = None
            for lease in live:
                if results.get((lease.resource, lease.token)):
                    lease._state.acknowledge(start)
                elif lease.resource in self._leases:
                    lease._state.lose("a renewal was refused: the server no longer has the lease")

    async def _renew(self, live: List[SessionLease]) -> dict:
        """{(resource, token): renewed} for `live`: one renew_all() per ttl."""
        by_ttl: Dict[float, List[SessionLease]] = {}
        for lease in live:
            by_ttl.setdefault(lease.ttl, []).append(lease)
        results = {}
        async with self._lock:
            self._in_call = True
            try:
                conn = await self._connection()
                for ttl, group in by_ttl.items():
                    for resource, token, renewed in await _compat.rows(conn, _sql.RENEW_ALL, (
                            self.holder, ttl, [lease.resource for lease in group],
                            [lease.token for lease in group])):
                        results[(resource, token)] = renewed
            finally:
                self._in_call = False
        return results


class Election:
    """Leader election on `election` (a lease on the resource of that name,
    granted by fencing.campaign() in the order candidates asked).

    `campaign(wait)` waits in line and returns the leader's token;
    `is_leader`, `token`, `lost` (the lease's loss signal) and `check()`
    tell where this candidate stands, and fenced(conn, election) fences the
    leader's writes; `leader()` reads fencing.leader() (holder, token) or
    None; `observe()` watches the election on a connection of its own
    (LISTEN fencing_election, and a timer at the leader's expiry) and calls
    `on_new_leader(holder, token)` at each change (holder None: no leader);
    `resign()` hands the leadership to the next in line.  The leader gets
    `on_started_leading(token)` and, at its loss or resignation,
    `on_stopped_leading()`; with `recampaign=True` a leader that lost its
    leadership (not one that resigned) campaigns again."""

    def __init__(self, conninfo: str, election: str, candidate: Optional[str] = None, *, ttl,
                 recampaign: bool = False, on_started_leading: Optional[Callable] = None,
                 on_stopped_leading: Optional[Callable] = None, on_new_leader: Optional[Callable] = None):
        self.conninfo = conninfo
        self.election = check_resource(election)
        self.candidate = check_holder(candidate)
        self.ttl = seconds(ttl, "ttl", positive=True)
        self.recampaign = bool(recampaign)
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self._lease: Optional[Lease] = None
        self._closed = False
        self._resigning = False
        self._again = None              # the background campaign after a loss
        self._again_cancel = None
        self._observer = None
        self._observe_conn = None
        self._wake = None
        self._pending = False
        self._seen: Optional[Tuple[str, int]] = None
        self._seen_any = False

    async def __aenter__(self) -> "Election":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def holder(self) -> str:
        return self.candidate

    @property
    def resource(self) -> str:
        return self.election

    @property
    def is_leader(self) -> bool:
        """True while this candidate holds the leadership, by the clock."""
        lease = self._lease
        return lease is not None and lease.token is not None and not lease._released \
            and not lease._state.expired()

    @property
    def token(self) -> Optional[int]:
        """The token of this candidate's current or last leadership (None if it never led)."""
        return self._lease.token if self._lease is not None else None

    @property
    def lost(self):
        """The loss signal of the current or last leadership (None if it never led)."""
        return self._lease.lost if self._lease is not None else None

    def check(self) -> None:
        """Raises LeaseLost unless this candidate is the leader now."""
        if self._lease is None:
            raise LeaseLost(f"not the leader of {self.election}")
        self._lease.check()

    def remaining(self) -> float:
        return self._lease.remaining() if self._lease is not None else 0.0

    async def campaign(self, wait=FOREVER, cancel=None) -> int:
        """Waits in line (fencing.campaign) up to `wait` (FOREVER by
        default; None or 0: a try, LeaseBusy if another leads) and returns
        the leader's token; LeaseTimeout if the wait passed."""
        if self._closed:
            raise LeaseError("the election is closed")
        if self.is_leader:
            return self.token
        await self._drop_lost()
        lease = Lease(self.conninfo, self.election, holder=self.candidate, ttl=self.ttl, wait=wait,
                      cancel=cancel, _calls=_sql.ELECTION_CALLS)
        lease._lost_callbacks.append(self._stopped)
        await lease.acquire()
        self._lease = lease
        _compat.fire(self.on_started_leading, lease.token)
        return lease.token

    async def _drop_lost(self) -> None:
        """Releases a leadership that was lost (its keepalive connection with it)."""
        old = self._lease
        if old is not None and not old._released:
            try:
                await old.release()
            except psycopg.Error as e:
                log.info("fencing: releasing the lost leadership of %s: %s", self.election, e)

    def _stopped(self) -> None:
        """The leadership ended (loss or resignation)."""
        _compat.fire(self.on_stopped_leading)
        if self.recampaign and not self._closed and not self._resigning:
            self._again_cancel = _compat.new_event()
            self._again = _compat.spawn(self._campaign_again, f"fencing campaign {self.election}")

    async def _campaign_again(self) -> None:
        """Campaigns until it leads, resign() or close(): a failed campaign
        (the server gone, say, as it often is when the leadership was lost)
        is tried again after retry_interval(ttl), 50 ms to 1 s."""
        cancel = self._again_cancel
        while not self._closed and not cancel.is_set():
            try:
                await self.campaign(FOREVER, cancel)
                return
            except LeaseCancelled:       # resign() or close()
                return
            except Exception as e:
                log.warning("fencing: campaigning again in %s failed, retrying: %s", self.election, e)
            if await _compat.wait_event(cancel, retry_interval(self.ttl)):
                return

    async def resign(self) -> bool:
        """Gives the leadership up (fencing.resign): True if this candidate
        led and the server released it; a waiter in line leads next."""
        await self._stop_again()
        lease = self._lease
        if lease is None:
            return False
        self._resigning = True
        try:
            return await lease.release()
        finally:
            self._resigning = False

    async def leader(self) -> Optional[Tuple[str, int]]:
        """The election's live leader (holder, token) by fencing.leader(), or None."""
        conn = await _compat.connect(self.conninfo, autocommit=True,
                                     application_name=f"fencing leader {self.election}")
        try:
            found = await _compat.row(conn, _sql.LEADER, (self.election,))
        finally:
            await _compat.close_quietly(conn)
        return (found[0], found[1]) if found else None

    async def observe(self) -> None:
        """Starts watching the election (returns at once): on_new_leader at
        each change, read with fencing.leader() at each notification on
        channel fencing_election and at the leader's expiry."""
        if self._observer is not None:
            return
        conn = await _compat.connect(self.conninfo, autocommit=True,
                                     application_name=f"fencing observe {self.election}")
        try:
            await conn.execute(_sql.LISTEN)
        except BaseException:
            await _compat.close_quietly(conn)
            raise
        conn.add_notify_handler(self._notified)
        self._observe_conn = conn
        self._wake = _compat.Wake()
        self._observer = _compat.spawn(self._observe, f"fencing observe {self.election}")

    def _notified(self, notify) -> None:
        if notify.payload == self.election:
            self._pending = True

    async def _observe(self) -> None:
        conn = self._observe_conn
        while not self._wake.is_set():
            self._pending = False
            try:
                found = await _compat.row(conn, _sql.LEADER, (self.election,))
            except psycopg.Error as e:
                if self._wake.is_set():
                    return
                log.info("fencing: observing %s: %s; reconnecting", self.election, e)
                await _compat.close_quietly(conn)
                await self._wake.wait(1.0)
                try:
                    conn = await _compat.connect(self.conninfo, autocommit=True,
                                                 application_name=f"fencing observe {self.election}")
                    await conn.execute(_sql.LISTEN)
                    conn.add_notify_handler(self._notified)
                except psycopg.Error:
                    pass
                self._observe_conn = conn
                continue
            current = (found[0], found[1]) if found else None
            if current != self._seen or not self._seen_any:
                self._seen, self._seen_any = current, True
                _compat.fire(self.on_new_leader, *(current if current else (None, None)))
            if self._pending:
                continue
            # until a notification, or the leader's expiry by the server's clock
            timeout = max(0.0, found[2]) + 0.05 if found else None
            await _compat.wait_readable(conn, timeout, self._wake)

    async def _stop_again(self) -> None:
        if self._again_cancel is not None:
            self._again_cancel.set()
        if self._again is not None and not _compat.current_is(self._again):
            await _compat.join(self._again, self.ttl)
        self._again = self._again_cancel = None

    async def close(self) -> None:
        """Stops observing and campaigning, and resigns if leading."""
        if self._closed:
            return
        await self.resign()
        self._closed = True
        if self._observer is not None:
            self._wake.set()
            await _compat.join(self._observer, 5)
            await _compat.close_quietly(self._observe_conn)
            self._wake.close()
            self._observer = self._observe_conn = None


@asynccontextmanager
async def fenced(conn: psycopg.AsyncConnection, lease_or_token, *,
                 on_stale: Optional[Callable[[StaleTokenError], None]] = None) -> AsyncIterator[psycopg.AsyncCursor]:
    """Yields a cursor inside a transaction whose token is the lease's (or
    the plain token given); commits on exit, rolls back on an exception.
    With a lease (or an Election), checks it on entry and again before
    COMMIT (LeaseLost, nothing sent once its deadline passed), and bounds the
    transaction by the lease's remaining time (SET LOCAL
    idle_in_transaction_session_timeout, and transaction_timeout on
    PostgreSQL 17+): a holder frozen inside it is ended by the server at its
    deadline, so it cannot hold the next holder's write up.  A stale refusal
    calls on_stale(error) (a dead-letter hook), then raises StaleTokenError."""
    lease, token = begin(conn, lease_or_token)
    try:
        async with conn.transaction():
            cursor = conn.cursor()
            await cursor.execute(*opening(conn, lease, token))
            yield cursor
            if lease is not None:
                lease.check()     # raised inside: the transaction rolls back
    except psycopg.Error as e:
        mapped = on_refusal(e, on_stale)
        if mapped is e:
            raise
        raise mapped from e
