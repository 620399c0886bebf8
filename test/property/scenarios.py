"""Fixed schedules of the property test: its sessions' own code runs scripted
transactions (no randomness, no concurrency) against the extension, then its
checker replays the log.  Each schedule is one the random runs met and the
checker once judged wrongly, or one the extension once got wrong.

  own_detach_rolled_back: a write transaction detaches and attaches the
    partition of zone 2 (the table's floor rises to that partition's
    highest row token, 100), then inserts the new key (2, 1) under token 50:
    refused over 100, and the transaction rolls back with the DETACH's note.
    The checker must explain the refusal by the transaction's own DETACH
    (and must not without it: the control, as the seeded run in CI on
    PostgreSQL 15 reported it).
  own_detach_committed: the same refusal under a savepoint, and the
    transaction commits: the DETACH's note is in the log.

Options: --dsn DSN (a database where the extension is created; the schema
prop is made again).
"""

import argparse
import collections
import sys
import threading
import time

import psycopg

import property as model


class ScriptedRandom:
    """The session's choices: random() values in order, randint() the number of statements."""

    def __init__(self, values, statements):
        self.values = collections.deque(values)
        self.statements = statements

    def random(self):
        return self.values.popleft()

    def randint(self, low, high):
        return self.statements


class ScriptedGenerator(model.Generator):
    def __init__(self, rng, clock, live, statements):
        super().__init__(rng, clock, live)
        self.statements = collections.deque(statements)

    def statement(self):
        return self.statements.popleft()


# random() in Session.transaction(): REPEATABLE READ (< 0.1), the row-security role
# (< 0.15), fencing.token (< 0.7); per statement a savepoint (< 0.25) and, if it
# succeeds there, a rollback to it (< 0.5); at the end COMMIT (< 0.85).
NO = 0.9
YES = 0.01


def run_transaction(dsn, clock, log, index, values, statements):
    session = model.Session(index, dsn, 1, time.monotonic() + 60, clock, log, threading.Event(), None, 0)
    session.rng = ScriptedRandom(values, len(statements))
    session.gen = ScriptedGenerator(session.rng, clock, session.live, statements)
    with psycopg.connect(dsn, autocommit=True) as conn:
        session.transaction(conn)
    if session.failures or session.rng.values:
        raise AssertionError(f"the scripted transaction went otherwise: {session.failures}, "
                             f"choices left {list(session.rng.values)}")
    return statements


def detach():
    return model.Statement("ALTER TABLE prop.parted DETACH PARTITION prop.parted_2; "
                           "SELECT prop.note('parted', 'DETACH', '2', NULL); "
                           "ALTER TABLE prop.parted ATTACH PARTITION prop.parted_2 FOR VALUES IN (2)",
                           "ddl", "parted", ())


def insert(k, zone, token):
    return model.Statement(f"INSERT INTO prop.parted (k, zone, v, last_fencing_token) VALUES ({k}, {zone}, 0, {token})",
                           "insert", "parted", {"INSERT"})


def schedule(dsn, savepoint):
    """Returns (log, the refused INSERT)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(model.SETUP)
    clock = model.Clock()
    log = {}
    # (1, 2) under 100, committed: the partition of zone 2 holds token 100.
    run_transaction(dsn, clock, log, 0, [NO, NO, NO, NO, YES], [insert(1, 2, 100)])
    if savepoint:
        # DETACH/ATTACH; the INSERT under a savepoint, refused; COMMIT.
        values = [NO, NO, NO, NO, YES, YES]
    else:
        # DETACH/ATTACH; the INSERT, refused: the transaction rolls back.
        values = [NO, NO, NO, NO, NO]
    _, refused = run_transaction(dsn, clock, log, 1, values, [detach(), insert(2, 1, 50)])
    return log, refused


def expect(name, condition, what):
    if not condition:
        print(f"  {name}: {what}")
    return condition


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    failed = 0
    for name, savepoint in (("own_detach_rolled_back", False), ("own_detach_committed", True)):
        log, refused = schedule(args.dsn, savepoint)
        audit, final = model.collect(args.dsn)
        stats = collections.Counter()
        violations = model.check(audit, log, final, stats)
        ok = expect(name, refused.outcome == "23T01" and "stored token 100 " in (refused.detail or ""),
                    f"the extension did not refuse the INSERT over the DETACH's floor 100: "
                    f"{refused.outcome} {refused.detail}")
        ok &= expect(name, bool(refused.own_detaches), "the session did not note the transaction's DETACH")
        notes = [row for row in audit if row["op"] == "DETACH"]
        ok &= expect(name, len(notes) == (1 if savepoint else 0), f"DETACH notes in the log: {len(notes)}")
        ok &= expect(name, not violations and stats["refusals predicted"] == 1
                     and stats["refusals by its own DETACH"] == (0 if savepoint else 1),
                     f"the checker: {violations}, {dict(stats)}")
        if not savepoint:
            # The control: without the transaction's own DETACH the refusal is unexplained.
            refused.own_detaches = []
            control = model.check(audit, log, final, collections.Counter())
            ok &= expect(name, any(v.startswith("a refusal the model cannot explain: token 50 refused over 100")
                                   for v in control),
                         f"the control was not flagged: {control}")
        print(f"test property_{name} ... {'ok' if ok else 'FAILED'}")
        failed += not ok
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
