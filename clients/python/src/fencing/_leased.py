"""@fencing.leased: a function (plain or async) run under a lease keyed by
its arguments."""

import functools
import inspect
from typing import Callable, Optional

from ._core import FOREVER, RELEASED, seconds
from .errors import LeaseLost


def leased(resource: str, *, ttl, wait=FOREVER, holder: Optional[str] = None, conninfo: str = "",
           lease_arg: str = "lease") -> Callable:
    """Runs the decorated function under a lease on `resource`, formatted
    with the call's bound arguments (str.format: "job:{order_id}"), waiting
    up to `wait` (FOREVER by default) for it.  A parameter named `lease_arg`
    ("lease") receives the lease, to fence the function's writes and watch
    `lease.lost`.  The lease is released when the function returns or
    raises; if it was lost while the function ran, the call raises LeaseLost
    (after the function returned: a thread is not interrupted).  An async
    function gets a fencing.aio.Lease."""
    if not isinstance(resource, str):
        raise TypeError(f"leased() takes a resource pattern (str), not {resource!r}")
    seconds(ttl, "ttl", positive=True)
    seconds(wait, "wait", allow_none=True, allow_forever=True)

    def decorate(function: Callable) -> Callable:
        signature = inspect.signature(function)
        takes_lease = lease_arg in signature.parameters

        def key(args, kwargs) -> str:
            bound = signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            values = {name: value for name, value in bound.arguments.items() if name != lease_arg}
            try:
                return resource.format(*values.values(), **values)
            except (KeyError, IndexError) as e:
                raise TypeError(f"leased({resource!r}): {function.__qualname__} has no argument {e}") from None

        def ended(lease, result):
            if lease.lost.is_set() and lease._state.reason != RELEASED:
                raise LeaseLost(f"lease on {lease.resource} lost while {function.__qualname__} ran: "
                                f"{lease._state.reason}")
            return result

        if inspect.iscoroutinefunction(function):
            @functools.wraps(function)
            async def run_async(*args, **kwargs):
                from . import aio
                async with aio.Lease(conninfo, key(args, kwargs), holder=holder, ttl=ttl, wait=wait) as lease:
                    if takes_lease:
                        kwargs[lease_arg] = lease
                    result = await function(*args, **kwargs)
                    lease._state.expired()      # reads the clock
                    return ended(lease, result)
            return run_async

        @functools.wraps(function)
        def run(*args, **kwargs):
            from .lease import Lease
            with Lease(conninfo, key(args, kwargs), holder=holder, ttl=ttl, wait=wait) as lease:
                if takes_lease:
                    kwargs[lease_arg] = lease
                result = function(*args, **kwargs)
                lease._state.expired()
                return ended(lease, result)
        return run
    return decorate
