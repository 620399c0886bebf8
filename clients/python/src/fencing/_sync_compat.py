"""The threaded side of what fencing.lease (generated from fencing.aio) and
fencing.aio do differently: the same names as _aio_compat.py, for threads."""

import logging
import os
import select
import threading
from typing import Any, Callable, Optional

import psycopg

from . import _sql
from ._core import mark_interrupted
from ._deadline import Deadline
from .errors import LeaseCancelled

log = logging.getLogger("fencing")

Connection = psycopg.Connection
# How often a waiting call looks at its `cancel` event (a local check: the
# wait itself is one server-side call).
CANCEL_CHECK = 0.05


def new_event() -> threading.Event:
    return threading.Event()


def new_lock() -> threading.RLock:
    return threading.RLock()


def new_deadline(ttl: float, on_lost: Callable[[], None]) -> Deadline:
    return Deadline(ttl, on_lost=on_lost)


def connect(conninfo: str, **options) -> psycopg.Connection:
    """A connection to a server whose fencing extension is 0.4.0 or later
    (UnsupportedServer otherwise, the connection closed)."""
    conn = psycopg.connect(conninfo, **options)
    try:
        found = conn.execute(_sql.EXTVERSION).fetchone()
        error = _sql.unsupported(found[0] if found else None)
        if error is not None:
            raise error
        if not options.get("autocommit"):
            conn.rollback()
    except BaseException:
        close_quietly(conn)
        raise
    return conn


def one(conn, sql: str, params=None) -> Any:
    return conn.execute(sql, params).fetchone()[0]


def row(conn, sql: str, params=None):
    return conn.execute(sql, params).fetchone()


def rows(conn, sql: str, params=None) -> list:
    return conn.execute(sql, params).fetchall()


def close_quietly(conn) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:   # closing a broken connection
            pass


def interrupt(conn) -> None:
    """Sends a cancel request for the call in flight on `conn` from another
    thread, without waiting for it."""
    if conn is None or conn.closed:
        return
    mark_interrupted(conn)

    def cancel():
        try:
            conn.cancel()
        except Exception:
            pass
    threading.Thread(target=cancel, daemon=True).start()


def wait_event(event: threading.Event, timeout: float) -> bool:
    return event.wait(max(0.0, timeout))


def wait_forever(event: threading.Event) -> None:
    event.wait()


def spawn(function: Callable, name: str) -> threading.Thread:
    thread = threading.Thread(target=function, daemon=True, name=name)
    thread.start()
    return thread


def current_is(worker) -> bool:
    return worker is not None and threading.current_thread() is worker


def join(worker, timeout: float) -> bool:
    if worker is None or worker is threading.current_thread():
        return True
    worker.join(timeout)
    return not worker.is_alive()


def fire(callback: Optional[Callable], *args) -> None:
    if callback is None:
        return
    try:
        callback(*args)
    except Exception:
        log.exception("fencing: a callback raised")


def wait_call(conn, sql: str, params, cancel, undo: Callable) -> Any:
    """One waiting call.  Ctrl-C (KeyboardInterrupt) makes psycopg cancel it
    on the server; a `cancel` threading.Event set meanwhile sends the cancel
    request from a watching thread, and a grant that came first is undone
    with `undo(value)`: LeaseCancelled, nothing stays queued."""
    if cancel is None:
        return one(conn, sql, params)
    if cancel.is_set():

        raise LeaseCancelled("the wait was cancelled")
    done = threading.Event()

    def watch():
        while not done.is_set():
            if cancel.wait(CANCEL_CHECK):
                # sent again every _sql.CANCEL_RESEND s until the call has ended:
                # PostgreSQL drops a cancel that comes while it still reads
                # the call's messages
                while not done.is_set():
                    try:
                        conn.cancel()
                    except Exception:
                        pass
                    done.wait(_sql.CANCEL_RESEND)
                return
    watcher = threading.Thread(target=watch, daemon=True, name="fencing cancel watcher")
    watcher.start()
    try:
        value = one(conn, sql, params)
    except psycopg.errors.QueryCanceled:
        if not cancel.is_set():
            raise
        value = None
    finally:
        done.set()
        watcher.join()
    if cancel.is_set():
        if value is not None:
            undo(value)

        raise LeaseCancelled("the wait was cancelled")
    return value


class Wake:
    """Ends a wait_readable() at once (stop), from any thread: a pipe."""

    def __init__(self):
        self._read, self._write = os.pipe()
        self._set = False

    def set(self) -> None:
        if not self._set:
            self._set = True
            try:
                os.write(self._write, b"x")
            except OSError:
                pass

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        if not self._set:
            select.select([self._read], [], [], max(0.0, timeout))
        return self._set

    def close(self) -> None:
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass


def wait_readable(conn, timeout: Optional[float], wake: Wake) -> None:
    select.select([conn.pgconn.socket, wake._read], [], [], timeout)
