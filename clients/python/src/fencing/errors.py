"""The client's exceptions, and the mapping of the server's 23T01 and 23T02
to them.  A refused write's fields come from the error's standard fields
(table, column, constraint) and from its DETAIL (key, presented and stored
token), whose format docs/drivers-errors.md declares stable."""

import re
import threading
from typing import Optional

import psycopg

STALE_TOKEN = "23T01"
MISSING_TOKEN = "23T02"


class FencingError(Exception):
    """Base class of every error this client raises itself."""


class LeaseError(FencingError):
    """Base class of the lease errors."""


class LeaseLost(LeaseError):
    """The lease is gone: its deadline passed, or a renewal was refused."""


class LeaseTimeout(LeaseError):
    """The lease was not granted within `wait` (a wait that passed)."""


class LeaseBusy(LeaseError):
    """A try (no `wait`, or `wait=0`) found the lease held by another holder."""


class LeaseCancelled(LeaseError):
    """A wait ended by its `cancel` event; nothing stays queued on the server.
    (asyncio cancellation raises asyncio.CancelledError, Ctrl-C KeyboardInterrupt.)"""


class UnsupportedServer(FencingError):
    """The server's fencing extension is missing or older than this client needs."""


class LeaseAlreadyHeld(LeaseError):
    """The holder asked again for a lease it holds; `token` is the one it holds."""

    def __init__(self, message: str, token: Optional[int] = None):
        super().__init__(message)
        self.token = token


class RefusedWriteError(FencingError, psycopg.IntegrityError):
    """A write the storage refused (class 23, so `except psycopg.IntegrityError`
    catches it too).  `diag` is the server error's; the other fields are None
    where the server did not say."""

    def __init__(self, error: psycopg.Error):
        super().__init__(str(error), info=error.pgresult)
        diag = error.diag
        self.schema: Optional[str] = diag.schema_name
        self.table: Optional[str] = diag.table_name
        self.column: Optional[str] = diag.column_name
        self.constraint: Optional[str] = diag.constraint_name
        self.detail: Optional[str] = diag.message_detail
        self.hint: Optional[str] = diag.message_hint
        fields = parse_detail(self.detail or "")
        self.relation: Optional[str] = fields.get("relation")
        self.resource: Optional[str] = fields.get("resource")
        self.key: Optional[str] = fields.get("key")
        self.presented: Optional[int] = fields.get("presented")
        self.stored: Optional[int] = fields.get("stored")
        self.mode: Optional[str] = fields.get("mode")


class StaleTokenError(RefusedWriteError):
    """23T01: a newer lock holder has written; stop and acquire again."""

    sqlstate = STALE_TOKEN


class MissingTokenError(RefusedWriteError):
    """23T02: the write presented no token."""

    sqlstate = MISSING_TOKEN


# DETAIL of 23T01: "<subject>: presented token N, stored token M (monotonic mode)."
# and of 23T02: "<subject>: no token presented, stored token M." with an
# optional note after it.  Matched from the right: a key may contain anything.
_STALE = re.compile(r"^(?P<subject>.*): presented token (?P<presented>-?\d+), "
                    r"stored token (?P<stored>-?\d+|\(not visible\)) \((?P<mode>\w+) mode\)\.$", re.S)
_MISSING = re.compile(r"^(?P<subject>.*): no token presented, "
                      r"stored token (?P<stored>-?\d+|\(not visible\))\.(?: fencing\.token is .*)?$", re.S)
_RELATION = re.compile(r"^Relation (?P<relation>.+?), (?:key (?P<key>.*)|all rows)$", re.S)
_RESOURCE = re.compile(r'^Resource "(?P<resource>.*)"$', re.S)


def parse_detail(detail: str) -> dict:
    """The fields of a 23T01 or 23T02 DETAIL: relation, key, resource,
    presented, stored, mode; missing ones are absent.  A key or stored token
    the writer may not see ("(not visible)") is absent too."""
    fields: dict = {}
    match = _STALE.match(detail) or _MISSING.match(detail)
    if not match:
        return fields
    groups = match.groupdict()
    if groups.get("presented") is not None:
        fields["presented"] = int(groups["presented"])
        fields["mode"] = groups["mode"]
    if groups["stored"] != "(not visible)":
        fields["stored"] = int(groups["stored"])
    subject = groups["subject"]
    relation = _RELATION.match(subject)
    if relation:
        fields["relation"] = relation.group("relation")
        key = relation.group("key")
        if key is not None and key != "(not visible)":
            fields["key"] = key
    resource = _RESOURCE.match(subject)
    if resource:
        fields["resource"] = resource.group("resource")
    return fields


def translate(error: BaseException) -> BaseException:
    """The client's exception for a psycopg error with SQLSTATE 23T01 or 23T02
    (StaleTokenError, MissingTokenError); any other error is returned as is.
    For writes made without fenced(): `raise fencing.translate(e) from e`."""
    if isinstance(error, RefusedWriteError) or not isinstance(error, psycopg.Error):
        return error
    if error.sqlstate == STALE_TOKEN:
        return StaleTokenError(error)
    if error.sqlstate == MISSING_TOKEN:
        return MissingTokenError(error)
    return error


_stale_lock = threading.Lock()
_stale_refusals = 0


def count_stale_refusal() -> None:
    global _stale_refusals
    with _stale_lock:
        _stale_refusals += 1


def stale_refusals() -> int:
    """How many writes of this process fenced() saw refused as stale (23T01)."""
    with _stale_lock:
        return _stale_refusals
