"""psycopg 3, psycopg2 and asyncpg against a stale (23T01) and an unfenced
(23T02) write: the exception class each raises, and the SQLSTATE, constraint,
column, table and schema it carries.  Prints "test drivers_<driver> ... ok"
or "... FAILED" with what differed.  The database (PG* environment) has
shop.orders, protected with token column "epoch", row 'order:1' at token 5
(test/drivers/run makes it)."""

import asyncio
import sys

import asyncpg
import psycopg
import psycopg2

STALE = ("SELECT set_config('fencing.token', '4', true)",
         "UPDATE shop.orders SET status = 'late' WHERE id = 'order:1'")
MISSING = ("UPDATE shop.orders SET status = 'late' WHERE id = 'order:1'",)
CASES = {"23T01": STALE, "23T02": MISSING}
CONSTRAINT = {"23T01": "fencing_stale_token", "23T02": "fencing_missing_token"}


def expected(cls):
    return {state: (cls, state, CONSTRAINT[state], "epoch", "orders", "shop") for state in CASES}


def report(driver, seen, want):
    failures = [f"  {state}: got {seen.get(state)}, want {want[state]}"
                for state in want if seen.get(state) != want[state]]
    print(f"test drivers_{driver} ... {'FAILED' if failures else 'ok'}")
    for failure in failures:
        print(failure)
    return not failures


def with_psycopg3():
    seen = {}
    with psycopg.connect(autocommit=True) as conn:
        for state, statements in CASES.items():
            try:
                with conn.transaction():
                    for statement in statements:
                        conn.execute(statement)
                seen[state] = "no error"
            except psycopg.IntegrityError as e:
                d = e.diag
                seen[state] = (type(e), e.sqlstate, d.constraint_name, d.column_name, d.table_name,
                               d.schema_name)
        conn.execute("SELECT 1")                # the connection is still usable
    return report("psycopg3", seen, expected(psycopg.IntegrityError))


def with_psycopg2():
    seen = {}
    conn = psycopg2.connect("")
    conn.autocommit = True
    try:
        for state, statements in CASES.items():
            try:
                with conn, conn.cursor() as cur:
                    for statement in statements:
                        cur.execute(statement)
                seen[state] = "no error"
            except psycopg2.IntegrityError as e:
                d = e.diag
                seen[state] = (type(e), e.pgcode, d.constraint_name, d.column_name, d.table_name,
                               d.schema_name)
        conn.cursor().execute("SELECT 1")
    finally:
        conn.close()
    return report("psycopg2", seen, expected(psycopg2.IntegrityError))


async def asyncpg_seen():
    seen = {}
    conn = await asyncpg.connect()
    try:
        for state, statements in CASES.items():
            try:
                async with conn.transaction():
                    for statement in statements:
                        await conn.execute(statement)
                seen[state] = "no error"
            except asyncpg.PostgresError as e:
                seen[state] = (type(e), e.sqlstate, e.constraint_name, e.column_name, e.table_name,
                               e.schema_name)
        assert await conn.fetchval("SELECT 1") == 1     # not disconnected, whatever the class says
    finally:
        await conn.close()
    return seen


def with_asyncpg():
    """asyncpg knows no 23T01/23T02 and has no class-prefix fallback: it
    raises UnknownPostgresError (a FatalPostgresError, although it does not
    close the connection)."""
    return report("asyncpg", asyncio.run(asyncpg_seen()),
                  expected(asyncpg.exceptions.UnknownPostgresError))


def with_asyncpg_registered():
    """An application may register its own classes for the two SQLSTATEs
    (asyncpg's class registry, as for its own classes): asyncpg then raises
    them, as IntegrityConstraintViolationError subclasses."""

    class StaleFencingTokenError(asyncpg.IntegrityConstraintViolationError):
        sqlstate = "23T01"

    class MissingFencingTokenError(asyncpg.IntegrityConstraintViolationError):
        sqlstate = "23T02"

    seen = asyncio.run(asyncpg_seen())
    want = expected(None)
    want["23T01"] = (StaleFencingTokenError,) + want["23T01"][1:]
    want["23T02"] = (MissingFencingTokenError,) + want["23T02"][1:]
    return report("asyncpg_registered", seen, want)


def main():
    results = [check() for check in (with_psycopg3, with_psycopg2, with_asyncpg,
                                     with_asyncpg_registered)]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
