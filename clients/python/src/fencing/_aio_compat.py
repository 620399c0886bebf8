"""The asyncio side of what fencing.aio and its generated threaded twin
(fencing.lease) do differently: events, locks, background work, waits and
the cancellation of a call in flight.  _sync_compat.py has the same names
for threads; tools/unasync.py swaps one module for the other."""

import asyncio
import inspect
import logging
from typing import Any, Callable, Optional

import psycopg

from . import _sql
from ._core import mark_interrupted
from ._deadline import Deadline
from .errors import LeaseCancelled

log = logging.getLogger("fencing")

Connection = psycopg.AsyncConnection


def new_event() -> asyncio.Event:
    return asyncio.Event()


def new_lock() -> asyncio.Lock:
    return asyncio.Lock()


def new_deadline(ttl: float, on_lost: Callable[[], None]) -> Deadline:
    loop = asyncio.get_running_loop()
    return Deadline(ttl, on_lost=on_lost, event=asyncio.Event(), schedule=loop.call_later)


async def connect(conninfo: str, **options) -> psycopg.AsyncConnection:
    """A connection to a server whose fencing extension is 0.4.0 or later
    (UnsupportedServer otherwise, the connection closed)."""
    conn = await psycopg.AsyncConnection.connect(conninfo, **options)
    try:
        row = await (await conn.execute(_sql.EXTVERSION)).fetchone()
        error = _sql.unsupported(row[0] if row else None)
        if error is not None:
            raise error
        if not options.get("autocommit"):
            await conn.rollback()
    except BaseException:
        await close_quietly(conn)
        raise
    return conn


async def one(conn, sql: str, params=None) -> Any:
    cursor = await conn.execute(sql, params)
    return (await cursor.fetchone())[0]


async def row(conn, sql: str, params=None):
    return await (await conn.execute(sql, params)).fetchone()


async def rows(conn, sql: str, params=None) -> list:
    return await (await conn.execute(sql, params)).fetchall()


async def close_quietly(conn) -> None:
    if conn is not None:
        try:
            await conn.close()
        except Exception:    # closing a broken connection
            pass


def interrupt(conn) -> None:
    """Sends a cancel request for the call in flight on `conn`, without
    waiting for it (from a timer or a loss callback)."""
    if conn is None or conn.closed:
        return
    mark_interrupted(conn)

    def cancel():
        try:
            conn.cancel()
        except Exception:
            pass
    asyncio.get_running_loop().run_in_executor(None, cancel)


async def wait_event(event: asyncio.Event, timeout: float) -> bool:
    """True if `event` was set within `timeout` seconds."""
    try:
        await asyncio.wait_for(event.wait(), max(0.0, timeout))
    except asyncio.TimeoutError:
        pass
    return event.is_set()


async def wait_forever(event: asyncio.Event) -> None:
    await event.wait()


def spawn(function: Callable, name: str) -> asyncio.Task:
    """Runs `function()` in the background (a task; a daemon thread in _sync_compat)."""
    return asyncio.get_running_loop().create_task(function(), name=name)


def current_is(worker) -> bool:
    return worker is not None and asyncio.current_task() is worker


async def join(worker, timeout: float) -> bool:
    """Waits up to `timeout` for background work to end; True if it did
    (else it is cancelled: a call it had in flight is abandoned)."""
    if worker is None or worker.done():
        return True
    try:
        await asyncio.wait_for(asyncio.shield(worker), timeout)
        return True
    except asyncio.TimeoutError:
        worker.cancel()
        return False
    except Exception:     # it ended with an error: logged where it ran
        return True


def fire(callback: Optional[Callable], *args) -> None:
    """Calls a user's callback (a coroutine function's result becomes a
    task); an exception it raises is logged, never propagated."""
    if callback is None:
        return
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            asyncio.ensure_future(result).add_done_callback(_log_failure)
    except Exception:
        log.exception("fencing: a callback raised")


def _log_failure(task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("fencing: a callback raised", exc_info=task.exception())


async def wait_call(conn, sql: str, params, cancel, undo: Callable) -> Any:
    """One waiting call (fencing.acquire/campaign with a wait).  If the task
    is cancelled, or `cancel` (an asyncio.Event) is set, the server-side call
    is cancelled (a cancel request) and awaited, so nothing stays queued; a
    grant that came first is undone with `undo(value)` (await-ed)."""
    call = asyncio.ensure_future(one(conn, sql, params))
    waiter = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        await asyncio.wait([call] if waiter is None else [call, waiter],
                           return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _cancel_call(conn, call, undo)
        raise
    finally:
        if waiter is not None:
            waiter.cancel()
    if call.done():
        return call.result()
    await _cancel_call(conn, call, undo)

    raise LeaseCancelled("the wait was cancelled")


async def _cancel_call(conn, call, undo) -> None:
    # A cancel request that reaches the server while it still reads the
    # call's messages is dropped (PostgreSQL ignores a cancel then): send it
    # again every _sql.CANCEL_RESEND s until the call has ended.
    loop = asyncio.get_running_loop()
    while not call.done():
        await loop.run_in_executor(None, conn.cancel)
        await asyncio.wait([call], timeout=_sql.CANCEL_RESEND)
    try:
        value = await asyncio.shield(call)
    except psycopg.Error:    # 57014: cancelled, as asked
        return
    if value is not None:
        await undo(value)


class Wake:
    """Ends a wait_readable() at once (stop)."""

    def __init__(self):
        self.event = asyncio.Event()

    def set(self) -> None:
        self.event.set()

    def is_set(self) -> bool:
        return self.event.is_set()

    async def wait(self, timeout: float) -> bool:
        return await wait_event(self.event, timeout)

    def close(self) -> None:
        pass


async def wait_readable(conn, timeout: Optional[float], wake: Wake) -> None:
    """Until `conn`'s socket has something to read (a notification), `wake`
    is set, or `timeout` seconds (None: no limit) pass."""
    loop = asyncio.get_running_loop()
    readable = loop.create_future()
    fd = conn.pgconn.socket
    loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
    stop = asyncio.ensure_future(wake.event.wait())
    try:
        await asyncio.wait([readable, stop], timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        loop.remove_reader(fd)
        stop.cancel()
        if not readable.done():
            readable.cancel()
