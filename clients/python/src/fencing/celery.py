"""fencing.celery: a Celery task run under a lease keyed by its arguments.

    from fencing.celery import FencedTask

    @app.task(bind=True, base=FencedTask, fencing_key="order:{order_id}", fencing_ttl=30,
              fencing_dead_letter="orders.dead_letter")
    def pay(self, order_id):
        with fencing.fenced(conn, self.request.fencing_lease) as cur:
            cur.execute("UPDATE orders SET status = 'paid' WHERE id = %s", (order_id,))

Each run takes the lease on fencing_key formatted with the call's arguments
(str.format, the defaults applied) before the task's body runs, holds it
while the body runs (renewed by fencing.Lease) and releases it after.  The
body reads the lease and its token on its request: self.request.fencing_lease,
self.request.fencing_token (self.request.fencing_resource, its key).

- A stale refusal (fencing.StaleTokenError out of the body: a newer holder has
  written) is never retried: the dead letter, a dict (task, id, args, kwargs,
  resource, holder, token, presented, stored, table, key, error), goes to
  fencing_dead_letter (a task name or signature, sent with the letter as its
  argument; or a callable, called with it; None: logged at warning only) and
  the task ends with celery.exceptions.Reject(requeue=False): its message is
  not delivered again (a RabbitMQ queue's dead-letter exchange gets it too),
  and a worker of Celery 5.7 records its result as FAILURE with that Reject.
  Even autoretry_for or self.retry(exc=...) does not retry it.
- A busy lease (not granted within fencing_wait, or at once without it):
  fencing_busy="retry" (default) retries the task with Celery's retry
  (countdown fencing_retry_delay, default the ttl; counts against
  max_retries); "skip" ends the run at once, returning None.
- LeaseLost, or any other error of the body, is an ordinary failure:
  nothing was written with a lost lease, so Celery's retry rules apply.

The holder is new for every run: <host>:<pid>:<random> (prefork processes of
one host do not share it), or fencing_holder.  The lease's name is the
resource's for every application on the database: give each application
its own prefix (fencing_key="billing:order:{order_id}")."""

import logging
import string
from datetime import timedelta
from inspect import Parameter, signature
from typing import Any, Dict, Optional, Tuple

try:
    from celery import Task, signature as celery_signature
    from celery.exceptions import Reject
except ImportError as e:     # the extra not installed
    raise ImportError(f"fencing.celery needs Celery 5, the client's extra celery "
                      f"(pip install 'clients/python[celery]'): {e}") from e

from fencing import (Lease, LeaseBusy, LeaseTimeout, StaleTokenError,  # the client's public API only
                     default_holder)

log = logging.getLogger("fencing.celery")

# LeaseBusy (a try that found the lease held) and LeaseTimeout (a wait that
# passed) are both "busy" for a task.  The holder of a run is the client's
# default identity, <host>:<pid>:<random>, which prefork processes of one
# host do not share.
BUSY = (LeaseBusy, LeaseTimeout)


def key_fields(template: str) -> set:
    """The argument names a key template reads ({order_id}, {order[id]}, {order.id})."""
    names = set()
    for _, field, _, _ in string.Formatter().parse(template):
        if field is not None:
            name = field.split(".", 1)[0].split("[", 1)[0]
            if name == "" or name.isdigit():
                raise ValueError(f"fencing_key {template!r}: name the task's arguments "
                                 "({order_id}), not positions")
            names.add(name)
    return names


class FencedTask(Task):
    """A Celery task base class: every run holds the lease on `fencing_key`
    formatted with its arguments (see the module's documentation).  Options
    (arguments of @app.task, or class attributes):

    fencing_key          str.format template of the resource, from the task's
                         argument names ("order:{order_id}"); required
    fencing_ttl          seconds (default 30)
    fencing_wait         seconds a busy lease is waited for (default None: a try)
    fencing_busy         "retry" (default) or "skip"
    fencing_retry_delay  countdown of a busy retry (default: the ttl)
    fencing_dead_letter  task name, signature or callable taking the letter
    fencing_holder       the holder (default: <host>:<pid>:<random>, new each run)
    fencing_conninfo     libpq conninfo (default: app.conf.fencing_conninfo, or "")
    """

    fencing_key: Optional[str] = None
    fencing_ttl: float = 30
    fencing_wait: Optional[float] = None
    fencing_busy: str = "retry"
    fencing_retry_delay: Optional[float] = None
    fencing_dead_letter: Any = None
    fencing_holder: Optional[str] = None
    fencing_conninfo: Optional[str] = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if run is None:      # a base class of tasks, not a task
            return
        if isinstance(run, staticmethod):
            parameters = list(signature(run.__func__).parameters.values())
        else:                # bind=True: the task is the first argument
            parameters = list(signature(run).parameters.values())[1:]
        cls._fencing_check_options(parameters)

    @classmethod
    def _fencing_check_options(cls, parameters) -> None:
        name = cls.__dict__.get("name") or cls.__name__
        if not isinstance(cls.fencing_key, str) or not cls.fencing_key:
            raise ValueError(f"task {name}: fencing_key (the resource, e.g. \"order:{{order_id}}\") "
                             f"is required, not {cls.fencing_key!r}")
        names = {p.name for p in parameters if p.kind not in (Parameter.VAR_POSITIONAL, Parameter.VAR_KEYWORD)}
        var_keyword = any(p.kind == Parameter.VAR_KEYWORD for p in parameters)
        unknown = sorted(key_fields(cls.fencing_key) - names)
        if unknown and not var_keyword:
            raise ValueError(f"task {name}: fencing_key {cls.fencing_key!r} names {', '.join(unknown)}, "
                             f"which is not an argument of the task ({', '.join(sorted(names)) or 'none'})")
        for option in ("fencing_ttl", "fencing_wait", "fencing_retry_delay"):
            value = getattr(cls, option)
            if value is None and option != "fencing_ttl":
                continue
            if isinstance(value, timedelta):
                value = value.total_seconds()
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"task {name}: {option} must be a positive number of seconds "
                                 f"or a timedelta, not {getattr(cls, option)!r}")
            setattr(cls, option, value)
        if cls.fencing_busy not in ("retry", "skip"):
            raise ValueError(f"task {name}: fencing_busy must be \"retry\" or \"skip\", not {cls.fencing_busy!r}")
        for option in ("fencing_holder", "fencing_conninfo"):
            value = getattr(cls, option)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"task {name}: {option} must be a string, not {value!r}")
        route = cls.fencing_dead_letter
        if route is not None and not isinstance(route, (str, dict)) and not callable(route):
            raise ValueError(f"task {name}: fencing_dead_letter must be a task name, a signature "
                             f"or a callable, not {route!r}")

    def fencing_resource(self, *args, **kwargs) -> str:
        """The resource of a call with these arguments: TypeError if the
        call does not fit the task, ValueError if the key needs an argument
        it lacks or comes out empty."""
        try:
            bound = signature(self.run).bind(*args, **kwargs)
        except TypeError as e:
            raise TypeError(f"task {self.name} (fencing_key {self.fencing_key!r}): {e}") from None
        bound.apply_defaults()
        values = dict(bound.arguments)
        for parameter in signature(self.run).parameters.values():
            if parameter.kind == Parameter.VAR_KEYWORD:
                values.update(values.pop(parameter.name, {}))
        try:
            resource = self.fencing_key.format(**values)
        except (KeyError, AttributeError, IndexError, TypeError) as e:
            raise ValueError(f"task {self.name}: fencing_key {self.fencing_key!r} cannot be formatted "
                             f"with the call's arguments ({e!r})") from None
        if not resource:
            raise ValueError(f"task {self.name}: fencing_key {self.fencing_key!r} is empty for this call")
        return resource

    def __call__(self, *args, **kwargs):
        resource = self.fencing_resource(*args, **kwargs)     # bad input: nothing acquired
        pushed = self.request_stack.top is None   # a direct call: no request of the worker's
        if pushed:
            self.push_request(args=args, kwargs=kwargs)
        try:
            return self._fencing_run(resource, args, kwargs)
        finally:
            if pushed:
                self.pop_request()

    def _fencing_run(self, resource: str, args: Tuple, kwargs: Dict):
        conninfo = self.fencing_conninfo
        if conninfo is None:
            conninfo = self.app.conf.get("fencing_conninfo") or ""
        lease = Lease(conninfo, resource, holder=self.fencing_holder or default_holder(),
                      ttl=self.fencing_ttl, wait=self.fencing_wait)
        try:
            lease.acquire()
        except BUSY as e:
            if self.fencing_busy == "skip":
                log.info("fencing: task %s[%s] skipped: %s", self.name, self.request.id, e)
                return None
            delay = self.fencing_retry_delay or self.fencing_ttl
            raise self.retry(exc=e, countdown=delay)
        request = self.request
        request.fencing_lease, request.fencing_token, request.fencing_resource = lease, lease.token, resource
        try:
            return self.run(*args, **kwargs)
        except StaleTokenError as e:
            self.dead_letter(e, lease, args, kwargs)
            raise Reject(f"stale token {lease.token} on {resource}: dead-lettered", requeue=False) from e
        finally:
            lease.release()

    def dead_letter(self, error: StaleTokenError, lease: Lease, args: Tuple, kwargs: Dict) -> dict:
        """Sends the dead letter of a stale refusal to fencing_dead_letter; returns it."""
        letter = {
            "task": self.name, "id": self.request.id, "args": list(args), "kwargs": dict(kwargs),
            "resource": lease.resource, "holder": lease.holder, "token": lease.token,
            "presented": error.presented, "stored": error.stored, "table": error.table,
            "key": error.key, "error": str(error).strip(),
        }
        log.warning("fencing: task %s[%s] dead-lettered: stale token %s on %s (stored %s)",
                    self.name, self.request.id, lease.token, lease.resource, error.stored)
        route: Any = self.fencing_dead_letter
        if route is None:
            pass
        elif isinstance(route, (str, dict)):
            celery_signature(route, app=self.app).apply_async((letter,))
        else:
            route(letter)
        return letter

    def retry(self, args=None, kwargs=None, exc=None, *rest, **options):
        """Celery's retry, except for a stale refusal: raised again, so that
        it is dead-lettered instead (autoretry_for calls this too)."""
        if isinstance(exc, StaleTokenError):
            raise exc
        return super().retry(args, kwargs, exc, *rest, **options)

