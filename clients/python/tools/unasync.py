#!/usr/bin/env python3
"""Writes the threaded client, src/fencing/lease.py, from the asyncio one,
src/fencing/aio.py (the only copy of the logic): `async`/`await` removed,
the asyncio names swapped for their threaded twins, _aio_compat for
_sync_compat (whose functions have the same names and contracts).

    tools/unasync.py          rewrite lease.py
    tools/unasync.py --check  exit 1 if lease.py is not what it would write

tests/test_unasync.py runs the check, so an edit of lease.py by hand, or of
aio.py without a regeneration, fails the tests."""

import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent.parent / "src" / "fencing"
SOURCE = HERE / "aio.py"
TARGET = HERE / "lease.py"

DOCSTRING = '''"""The threaded client: Lease, Session, Election and fenced() on psycopg's
Connection, kept alive by a daemon thread; `lost` is a threading.Event.

GENERATED from aio.py by tools/unasync.py: do not edit (edit aio.py, then
run tools/unasync.py).

    with fencing.Lease(conninfo, "order:101", ttl=10, wait=fencing.FOREVER) as lease:
        with fencing.fenced(conn, lease) as cur:
            cur.execute("UPDATE orders SET status = 'paid' WHERE id = 101")

A wait ends at Ctrl-C (KeyboardInterrupt) or when its `cancel`
threading.Event is set (LeaseCancelled), the server-side call cancelled.
"""
'''

# (pattern, replacement), applied in order to every line after the docstring
RULES = [
    (r"\basync def\b", "def"),
    (r"\basync with\b", "with"),
    (r"\basync for\b", "for"),
    (r"\bawait ", ""),
    (r"\b__aenter__\b", "__enter__"),
    (r"\b__aexit__\b", "__exit__"),
    (r"\b_aio_compat\b", "_sync_compat"),
    (r"\basynccontextmanager\b", "contextmanager"),
    (r"\bAsyncIterator\b", "Iterator"),
    (r"\bAsyncConnection\b", "Connection"),
    (r"\bAsyncCursor\b", "Cursor"),
    (r"`async with`", "`with`"),
    (r"asyncio\.Event", "threading.Event"),
]


def translate(line: str) -> str:
    for pattern, replacement in RULES:
        line = re.sub(pattern, replacement, line)
    return line


def _open_brackets(line: str) -> list:
    """Columns of the brackets still open at the end of `line` (strings not parsed:
    the source keeps brackets inside strings balanced)."""
    columns = []
    for column, char in enumerate(line):
        if char in "([{":
            columns.append(column)
        elif char in ")]}" and columns:
            columns.pop()
    return columns


def _lines(lines):
    """The translated lines, continuation lines moved left by what the
    translation removed before the bracket they align with."""
    shift, depth = 0, 0
    for line in lines:
        if depth > 0:
            if shift > 0 and line[:shift].strip() == "":
                line = line[shift:]
            new = translate(line)
        else:
            new = translate(line)
            opened, kept = _open_brackets(line), _open_brackets(new)
            shift = opened[-1] - kept[-1] if opened and len(opened) == len(kept) else 0
        depth = max(0, depth + _depth(line))
        yield new


def _depth(line: str) -> int:
    return sum(line.count(c) for c in "([{") - sum(line.count(c) for c in ")]}")


def generate(source: str) -> str:
    match = re.match(r'(?s)\s*""".*?"""\n', source)
    if not match:
        raise SystemExit("unasync: aio.py must start with its docstring")
    body = "\n".join(_lines(source[match.end():].split("\n")))
    if re.search(r"\basync\b|\bawait\b|\basyncio\b", body):
        line = next(l for l in body.splitlines() if re.search(r"\basync\b|\bawait\b|\basyncio\b", l))
        raise SystemExit(f"unasync: an asyncio construct the rules do not translate: {line.strip()}")
    return DOCSTRING + body


def main(argv) -> int:
    expected = generate(SOURCE.read_text())
    if argv[1:] == ["--check"]:
        if not TARGET.exists() or TARGET.read_text() != expected:
            print(f"unasync: {TARGET} is not generated from {SOURCE}: run tools/unasync.py", file=sys.stderr)
            return 1
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    TARGET.write_text(expected)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
