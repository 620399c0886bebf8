"""fencing for asyncio: the same Lease, Session and fenced() on psycopg's
AsyncConnection, kept alive by a task instead of a thread; `lost` is an
asyncio.Event.

    async with fencing.aio.Lease(conninfo, "order:101", holder="worker-A", ttl=10) as lease:
        async with fencing.aio.fenced(conn, lease) as cur:
            await cur.execute("UPDATE orders SET status = 'paid' WHERE id = 101")
"""

import asyncio
import logging
import time
from contextlib import asynccontextmanager
from typing import AsyncIterator, Callable, Dict, List, Optional

import psycopg

from . import _sql
from ._deadline import Deadline
from .errors import (FencingError, LeaseAlreadyHeld, LeaseLost, LeaseTimeout, MissingTokenError,
                     StaleTokenError)
from .fenced import begin, on_refusal
from .lease import LeaseBase, already_held, not_granted, retry_interval

__all__ = ["Lease", "Session", "SessionLease", "fenced", "FencingError", "LeaseAlreadyHeld", "LeaseLost",
           "LeaseTimeout", "MissingTokenError", "StaleTokenError"]

log = logging.getLogger("fencing")


async def _one(conn: psycopg.AsyncConnection, sql: str, params) -> object:
    cursor = await conn.execute(sql, params)
    return (await cursor.fetchone())[0]


async def acquire_token(conn: psycopg.AsyncConnection, resource: str, holder: str, ttl: float,
                        wait: Optional[float]) -> int:
    """One grant on `conn` (autocommit): the token, or LeaseTimeout or
    LeaseAlreadyHeld (as fencing.lease.acquire_token)."""
    with _sql.OwnLeaseNotices(conn) as notices:
        if wait:
            try:
                token = await _one(conn, _sql.ACQUIRE_WAIT, (resource, holder, ttl, wait))
            except psycopg.errors.UndefinedFunction:    # an extension without acquire(..., wait)
                until = time.monotonic() + wait
                while True:
                    token = await _one(conn, _sql.ACQUIRE, (resource, holder, ttl))
                    if token is not None or time.monotonic() >= until:
                        break
                    await _raise_if_own(conn, resource, holder)
                    await asyncio.sleep(min(_sql.POLL_INTERVAL, max(0.0, until - time.monotonic())))
        else:
            token = await _one(conn, _sql.ACQUIRE, (resource, holder, ttl))
    if token is None:
        if notices.token is not None:
            raise already_held(resource, holder, notices.token)
        await _raise_if_own(conn, resource, holder)
        raise not_granted(resource, wait)
    return token


async def _raise_if_own(conn, resource, holder) -> None:
    cursor = await conn.execute(_sql.OWN_LEASE, (resource, holder))
    row = await cursor.fetchone()
    if row is not None:
        raise already_held(resource, holder, row[0])


async def _close_quietly(conn: Optional[psycopg.AsyncConnection]) -> None:
    if conn is not None:
        try:
            await conn.close()
        except Exception:    # closing a broken connection
            pass


def _new_deadline(ttl: float, on_lost: Callable[[], None]) -> Deadline:
    loop = asyncio.get_running_loop()
    return Deadline(ttl, on_lost=on_lost, event=asyncio.Event(), schedule=loop.call_later)


class Lease(LeaseBase):
    """fencing.Lease for asyncio (`async with`): `token`, `lost` (an
    asyncio.Event), `deadline` (time.monotonic()), `check()`, `await release()`."""

    def __init__(self, conninfo: str, resource: str, *, holder: str, ttl: float,
                 wait: Optional[float] = None):
        _sql.check_arguments(ttl, wait)
        self.conninfo = conninfo
        self.resource = resource
        self.holder = holder
        self.ttl = ttl
        self.wait = wait
        self._conn: Optional[psycopg.AsyncConnection] = None
        self._task: Optional[asyncio.Task] = None
        self._released = False

    async def __aenter__(self) -> "Lease":
        await self.acquire()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.release()

    async def acquire(self) -> int:
        self._state = _new_deadline(self.ttl, self._stop_keepalive)
        conn = await self._connection()
        start = time.monotonic()
        try:
            self.token = await acquire_token(conn, self.resource, self.holder, self.ttl, self.wait)
            if time.monotonic() - start > self.ttl / 3:    # a long wait: renew for a full ttl
                start = time.monotonic()
                if not await _one(conn, _sql.RENEW, (self.resource, self.holder, self.token, self.ttl)):
                    raise LeaseLost(f"lease on {self.resource} lost right after its grant")
        except BaseException:
            await _close_quietly(self._conn)
            self._conn = None
            raise
        self._state.acknowledge(start)
        self._task = asyncio.get_running_loop().create_task(self._keepalive())
        return self.token

    async def release(self) -> bool:
        """Stops the keepalive and releases the lease (also after a loss);
        True if the server still had it.  Never raises for a failed release."""
        if self._released or self.token is None:
            return False
        self._released = True
        self._stop_keepalive()
        if self._task is not None:
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        released = False
        try:
            conn = await self._connection()
            released = bool(await _one(conn, _sql.RELEASE, (self.resource, self.holder, self.token)))
        except psycopg.Error as e:
            log.warning("fencing: release of %s failed (it expires at its ttl): %s", self.resource, e)
        finally:
            self._state.lose("released")
            await _close_quietly(self._conn)
            self._conn = None
        return released

    def _stop_keepalive(self) -> None:
        """On loss or release: a renewal in flight is abandoned, and its
        connection with it (the next call reconnects)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def _connection(self) -> psycopg.AsyncConnection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            await _close_quietly(self._conn)
            self._conn = await psycopg.AsyncConnection.connect(
                self.conninfo, **_sql.keepalive_options(self.conninfo, self.holder, [self]))
        return self._conn

    async def _keepalive(self) -> None:
        retry = retry_interval(self.ttl)
        due = self._state.last_start + self.ttl / 3
        while True:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            if self._state.expired():
                return
            start = time.monotonic()
            conn = None
            try:
                conn = await self._connection()
                renewed = await _one(conn, _sql.RENEW, (self.resource, self.holder, self.token, self.ttl))
            except (psycopg.Error, asyncio.CancelledError) as e:
                # a failed call, or one abandoned at the deadline or release:
                # the connection's state is unknown
                await _close_quietly(conn)
                if self._conn is conn:
                    self._conn = None
                if isinstance(e, asyncio.CancelledError):
                    raise
                log.info("fencing: renewal of %s failed, retrying until the deadline: %s", self.resource, e)
                due = time.monotonic() + retry
                continue
            if not renewed:
                self._state.lose("a renewal was refused: the server no longer has the lease")
                return
            if not self._state.acknowledge(start):
                return
            due = start + self.ttl / 3


class SessionLease(LeaseBase):
    """A lease of an asyncio Session: `token`, `lost`, `deadline`, `check()`,
    `await release()`; `async with` releases it."""

    def __init__(self, session: "Session", resource: str, token: int, ttl: float):
        self.session = session
        self.resource = resource
        self.holder = session.holder
        self.token = token
        self.ttl = ttl
        self._state = _new_deadline(ttl, session._abandon_call)

    async def release(self) -> bool:
        return await self.session.release(self.resource)

    async def __aenter__(self) -> "SessionLease":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.release()


class Session:
    """fencing.Session for asyncio: one keepalive connection and one task
    renew all of a holder's leases with fencing.renew_all()."""

    def __init__(self, conninfo: str, *, holder: str):
        self.conninfo = conninfo
        self.holder = holder
        self._leases: Dict[str, SessionLease] = {}
        self._lock = asyncio.Lock()       # the connection: one call at a time
        self._conn: Optional[psycopg.AsyncConnection] = None
        self._wake = asyncio.Event()
        self._closed = False
        self._task: Optional[asyncio.Task] = None
        self._renewing: Optional[asyncio.Task] = None
        self._renew_all_missing = False

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    @property
    def leases(self) -> List[SessionLease]:
        return list(self._leases.values())

    async def lease(self, resource: str, *, ttl: float, wait: Optional[float] = None) -> SessionLease:
        """Acquires `resource` for this session (waiting up to `wait` on a
        connection of its own, so the renewals go on meanwhile)."""
        _sql.check_arguments(ttl, wait)
        if self._closed:
            raise LeaseLost("the session is closed")
        start = time.monotonic()
        if wait:
            async with await psycopg.AsyncConnection.connect(
                    self.conninfo, autocommit=True, application_name=f"fencing acquire {self.holder}") as conn:
                token = await acquire_token(conn, resource, self.holder, ttl, wait)
            if time.monotonic() - start > ttl / 3:
                start = time.monotonic()
                async with self._lock:
                    if not await _one(await self._connection(), _sql.RENEW, (resource, self.holder, token, ttl)):
                        raise LeaseLost(f"lease on {resource} lost right after its grant")
        else:
            async with self._lock:
                token = await acquire_token(await self._connection(), resource, self.holder, ttl, None)
        lease = SessionLease(self, resource, token, ttl)
        lease._state.acknowledge(start)
        self._leases[resource] = lease
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._keepalive())
        self._wake.set()
        return lease

    async def release(self, resource: str) -> bool:
        """Releases one lease of the session; True if the server still had it."""
        lease = self._leases.pop(resource, None)
        if lease is None:
            return False
        released = False
        async with self._lock:
            try:
                released = bool(await _one(await self._connection(), _sql.RELEASE,
                                           (resource, self.holder, lease.token)))
            except psycopg.Error as e:
                log.warning("fencing: release of %s failed (it expires at its ttl): %s", resource, e)
                await self._drop_connection()
        lease._state.lose("released")
        return released

    async def close(self) -> None:
        """Releases every lease and closes the keepalive connection."""
        if self._closed:
            return
        for resource in list(self._leases):
            await self.release(resource)
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await self._drop_connection()

    async def _connection(self) -> psycopg.AsyncConnection:
        if self._conn is None or self._conn.closed or self._conn.broken:
            await self._drop_connection()
            self._conn = await psycopg.AsyncConnection.connect(
                self.conninfo, **_sql.keepalive_options(self.conninfo, self.holder, self._leases.values()))
        return self._conn

    async def _drop_connection(self) -> None:
        await _close_quietly(self._conn)
        self._conn = None

    def _abandon_call(self) -> None:
        if self._renewing is not None and not self._renewing.done():
            self._renewing.cancel()

    async def _keepalive(self) -> None:
        retry_at = None
        while not self._closed:
            live = [lease for lease in self.leases if not lease._state.expired()]
            if not live:
                await self._wake.wait()
                self._wake.clear()
                continue
            due = retry_at if retry_at is not None else min(
                lease._state.last_start + lease.ttl / 3 for lease in live)
            try:
                await asyncio.wait_for(self._wake.wait(), max(0.0, due - time.monotonic()))
                self._wake.clear()
                continue
            except asyncio.TimeoutError:
                pass
            live = [lease for lease in live if not lease._state.expired()]
            if not live:
                continue
            start = time.monotonic()
            self._renewing = asyncio.get_running_loop().create_task(self._renew(live))
            try:
                results = await self._renewing
            except (psycopg.Error, asyncio.CancelledError) as e:
                if isinstance(e, asyncio.CancelledError) and self._closed:
                    raise
                log.info("fencing: renewal of %s's leases failed, retrying until their deadlines: %s",
                         self.holder, e)
                await self._drop_connection()
                retry_at = time.monotonic() + min(retry_interval(lease.ttl) for lease in live)
                continue
            retry_at = None
            for lease in live:
                if results.get((lease.resource, lease.token)):
                    lease._state.acknowledge(start)
                elif lease.resource in self._leases:
                    lease._state.lose("a renewal was refused: the server no longer has the lease")

    async def _renew(self, live: List[SessionLease]) -> dict:
        """{(resource, token): renewed} for `live`, one renew_all() per ttl."""
        by_ttl: Dict[float, List[SessionLease]] = {}
        for lease in live:
            by_ttl.setdefault(lease.ttl, []).append(lease)
        results = {}
        async with self._lock:
            conn = await self._connection()
            for ttl, group in by_ttl.items():
                if not self._renew_all_missing:
                    try:
                        cursor = await conn.execute(_sql.RENEW_ALL, (
                            self.holder, ttl, [lease.resource for lease in group],
                            [lease.token for lease in group]))
                        results.update({(r, t): renewed for r, t, renewed in await cursor.fetchall()})
                        continue
                    except psycopg.errors.UndefinedFunction:
                        self._renew_all_missing = True    # an older extension
                for lease in group:
                    results[(lease.resource, lease.token)] = await _one(
                        conn, _sql.RENEW, (lease.resource, self.holder, lease.token, ttl))
        return results


@asynccontextmanager
async def fenced(conn: psycopg.AsyncConnection, lease_or_token, *,
                 on_stale: Optional[Callable[[StaleTokenError], None]] = None) -> AsyncIterator[psycopg.AsyncCursor]:
    """fencing.fenced() for an AsyncConnection: yields a cursor in a
    transaction of its own with the token set; commits on exit; checks the
    lease on entry and before COMMIT (LeaseLost, nothing sent)."""
    lease, token = begin(conn, lease_or_token)
    try:
        async with conn.transaction():
            cursor = conn.cursor()
            await cursor.execute(_sql.SET_TOKEN, (str(token),))
            yield cursor
            if lease is not None:
                lease.check()
    except psycopg.Error as e:
        mapped = on_refusal(e, on_stale)
        if mapped is e:
            raise
        raise mapped from e
