"""A lease's deadline on the monotonic clock and its loss signal, shared by
the threaded Lease and Session.  A holder holds a lease from the start of
its last acknowledged call (grant or renewal) until that start + ttl
(docs/ha.md, "How a client times a lease"); a timer signals the loss at that
moment even while a renewal hangs, and every check reads the clock itself, so
a process that was frozen sees the loss the moment it thaws."""

import threading
import time
from typing import Any, Callable, Optional


def thread_timer(delay: float, function: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(delay, function)
    timer.daemon = True
    timer.start()
    return timer


class Deadline:
    """Loss is final: once `lost` is set, no acknowledgement moves the deadline.
    `lost` is a threading.Event and the timer a thread, or for fencing.aio an
    asyncio.Event and loop.call_later (whose clock is time.monotonic() too)."""

    def __init__(self, ttl: float, on_lost: Optional[Callable[[], None]] = None,
                 event: Any = None, schedule: Callable[[float, Callable[[], None]], Any] = thread_timer):
        self.ttl = ttl
        self.lost = threading.Event() if event is None else event
        self.reason: Optional[str] = None
        self.last_start: Optional[float] = None
        self._deadline: Optional[float] = None
        self._on_lost = on_lost
        self._schedule = schedule
        self._lock = threading.Lock()
        self._timer: Any = None

    @property
    def deadline(self) -> Optional[float]:
        return self._deadline

    def acknowledge(self, start: float) -> bool:
        """A call that started at `start` (time.monotonic()) was acknowledged;
        False if the lease was lost meanwhile."""
        with self._lock:
            if self.lost.is_set():
                return False
            late = self._deadline is not None and time.monotonic() >= self._deadline
            if not late and self.last_start is not None and start < self.last_start:
                return True
            if not late:
                self.last_start = start
                self._deadline = start + self.ttl
                self._arm()
        # an answer read after the deadline (a freeze, a timer not yet run)
        # does not revive the lease: the deadline passed, it is lost
        return not self.expired()

    def _arm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._schedule(max(0.0, self._deadline - time.monotonic()), self._fire)

    def _fire(self) -> None:
        with self._lock:
            if self.lost.is_set():
                return
            if time.monotonic() < self._deadline:   # woke a hair early
                self._arm()
                return
        self.lose("the lease's deadline passed before a renewal was acknowledged")

    def expired(self) -> bool:
        """Reads the clock: True if the lease is lost (signalling it if the
        deadline has just passed)."""
        if self.lost.is_set():
            return True
        if self._deadline is not None and time.monotonic() >= self._deadline:
            self.lose("the lease's deadline passed before a renewal was acknowledged")
            return True
        return False

    def remaining(self) -> float:
        return self._deadline - time.monotonic() if self._deadline is not None else 0.0

    def lose(self, reason: str) -> None:
        with self._lock:
            if self.lost.is_set():
                return
            self.reason = reason
            self.lost.set()
            if self._timer is not None:
                self._timer.cancel()
        if self._on_lost is not None:
            self._on_lost()
