"""An upgrade without an outage, under load (called by test/upgrade/online).

In a fresh database of the running cluster, with the OLD library installed:
CREATE EXTENSION fencing VERSION <old>, protected tables (one partitioned),
rows, a deleted key's mark, a lease and a fence.  Then, while writer threads
keep writing through new and long-lived sessions:
  1. the new library is installed (--install-new, a shell command);
  2. with --restart CMD (shared_preload_libraries): the server restarts, the
     one step preloading needs (connections drop; writers reconnect);
  3. ALTER EXTENSION fencing UPDATE runs.
Every operation's outcome is checked against what it must be, before,
during and after each step: a write with a fresh token succeeds; a stale
one, an unfenced one and a stale re-insert of a deleted key are refused; a
fenced_update() with a fresh token returns true; a lease renews.  A session
opened before the new library was installed (it keeps the old library)
must refuse every stale and unfenced write to the end; its fresh writes are
counted apart (docs/operations.md says what they need).  Finally the state
is checked: the version, the marks, the lease, the fence.

Prints one line per phase with the counts, and
"test online_upgrade_<old>_<mode> ... ok|FAILED".
"""

import argparse
import collections
import subprocess
import sys
import threading
import time

import psycopg

REFUSED = {"23T01", "23T02", "FN001", "FN002"}  # 0.1.0's library raised FN001/FN002


class Counter:
    def __init__(self):
        self.lock = threading.Lock()
        self.token = 1000

    def next(self):
        with self.lock:
            self.token += 1
            return self.token


class Run:
    def __init__(self, args):
        self.args = args
        self.tokens = Counter()
        self.phase = "old library" if args.install_new else "current library, old objects"
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.counts = collections.Counter()
        self.failures = []
        self.old_session = collections.Counter()

    def connect(self):
        return psycopg.connect(self.args.dsn, autocommit=False)

    def note(self, what, ok, detail=""):
        with self.lock:
            self.counts[(self.phase, what, "ok" if ok else "WRONG")] += 1
            if not ok and len(self.failures) < 20:
                self.failures.append(f"[{self.phase}] {what}: {detail}")

    def expect_ok(self, conn, what, statements, check=None):
        try:
            with conn.cursor() as cur:
                result = None
                for sql, params in statements:
                    cur.execute(sql, params)
                    if cur.description is not None:
                        result = cur.fetchone()
            conn.commit()
            if check is not None and not check(result):
                self.note(what, False, f"returned {result}")
                return
            self.note(what, True)
        except psycopg.Error as e:
            if e.sqlstate is None or conn.closed:  # the connection, not the statement
                raise
            conn.rollback()
            self.note(what, False, f"{e.sqlstate} {str(e).splitlines()[0]}")

    def expect_refused(self, conn, what, statements):
        try:
            with conn.cursor() as cur:
                for sql, params in statements:
                    cur.execute(sql, params)
            conn.commit()
            self.note(what, False, "accepted")
        except psycopg.Error as e:
            if e.sqlstate is None or conn.closed:  # the connection, not the statement
                raise
            conn.rollback()
            self.note(what, e.sqlstate in REFUSED, f"{e.sqlstate} {str(e).splitlines()[0]}")

    def round(self, conn, w):
        """One round of writer w's operations (its own rows: no waits between writers)."""
        t = self.tokens.next()
        self.expect_ok(conn, "fresh UPDATE", [("SELECT set_config('fencing.token', %s, true)", (str(t),)),
                                              ("UPDATE t SET v = v + 1 WHERE id = %s", (w,))])
        self.expect_ok(conn, "fresh UPDATE (partitioned)",
                       [("SELECT set_config('fencing.token', %s, true)", (str(self.tokens.next()),)),
                        ("UPDATE p SET v = v + 1 WHERE id = %s AND zone = 1", (w,))])
        self.expect_refused(conn, "stale UPDATE", [("SELECT set_config('fencing.token', '5', true)", None),
                                                   ("UPDATE t SET v = v + 1 WHERE id = %s", (w,))])
        self.expect_refused(conn, "unfenced UPDATE", [("UPDATE t SET v = v + 1 WHERE id = %s", (w,))])
        self.expect_refused(conn, "stale re-insert of a deleted key",
                            [("SELECT set_config('fencing.token', '600', true)", None),
                             ("INSERT INTO t VALUES (100, 0)", None)])
        self.expect_ok(conn, "fenced_update() fresh",
                       [("SELECT fencing.fenced_update('t', %s::jsonb, %s, '{\"v\": 1}')",
                         (f'{{"id": {w}}}', self.tokens.next()))],
                       check=lambda r: r is not None and r[0] is True)
        self.expect_ok(conn, "fenced_update() stale skipped",
                       [("SELECT fencing.fenced_update('t', %s::jsonb, 5, '{\"v\": 1}', 'skip')",
                         (f'{{"id": {w}}}',))],
                       check=lambda r: r is not None and r[0] is False)
        if self.floors:
            self.expect_refused(conn, "stale INSERT below a TRUNCATE floor",
                                [("SELECT set_config('fencing.token', '600', true)", None),
                                 ("INSERT INTO tr VALUES (%s, 0)", (1000 + t,))])
            self.expect_ok(conn, "fresh INSERT above a TRUNCATE floor",
                           [("SELECT set_config('fencing.token', %s, true)", (str(self.tokens.next()),)),
                            ("INSERT INTO tr VALUES (%s, 0)", (1000 + t,))])
        self.expect_ok(conn, "renew", [("SELECT fencing.renew('lease', 'holder', %s, '1 hour')",
                                        (self.args_lease,))],
                       check=lambda r: r is not None and r[0] is True)

    def writer(self, w):
        conn = None
        rounds = 0
        while not self.stop.is_set():
            try:
                if conn is None or rounds % 5 == 0:  # new sessions all along
                    if conn is not None:
                        conn.close()
                    conn = self.connect()
                self.round(conn, w)
                rounds += 1
            except psycopg.Error as e:
                with self.lock:
                    self.counts[(self.phase, "reconnect", "ok" if self.phase == "restart" else "WRONG")] += 1
                    if self.phase != "restart" and len(self.failures) < 20:
                        self.failures.append(f"[{self.phase}] lost connection: {e}")
                conn = None
                time.sleep(0.2)
        if conn is not None:
            conn.close()

    def old_session_round(self, conn):
        """The session opened before the new library: refuses to the end; fresh writes counted."""
        for what, statements in (("stale UPDATE", [("SELECT set_config('fencing.token', '5', true)", None),
                                                   ("UPDATE t SET v = v + 1 WHERE id = 9", None)]),
                                 ("unfenced UPDATE", [("UPDATE t SET v = v + 1 WHERE id = 9", None)]),
                                 ("stale re-insert of a deleted key",
                                  [("SELECT set_config('fencing.token', '600', true)", None),
                                   ("INSERT INTO t VALUES (100, 0)", None)])):
            if self.phase == "updated":
                # The old library over the new objects: any error refuses (0.1.0's
                # reads its text-named marks, gone: 42883); counted by SQLSTATE.
                try:
                    with conn.cursor() as cur:
                        for sql, params in statements:
                            cur.execute(sql, params)
                    conn.commit()
                    self.note("old session: " + what, False, "accepted")
                except psycopg.Error as e:
                    if e.sqlstate is None or conn.closed:
                        raise
                    conn.rollback()
                    self.note("old session: " + what, True)
                    self.old_session[(self.phase, f"{what} refused {e.sqlstate}")] += 1
                continue
            self.expect_refused(conn, "old session: " + what, statements)
        self.old_session_fresh(conn, "fresh UPDATE", "UPDATE t SET v = v + 1 WHERE id = 9")
        self.old_session_fresh(conn, "fresh INSERT of a new key",
                               f"INSERT INTO t VALUES ({1000 + self.tokens.next()}, 0)")

    def old_session_fresh(self, conn, what, sql):
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT set_config('fencing.token', %s, true)", (str(self.tokens.next()),))
                cur.execute(sql)
            conn.commit()
            self.old_session[(self.phase, f"{what} accepted")] += 1
        except psycopg.Error as e:
            if e.sqlstate is None or conn.closed:  # the connection, not the statement
                raise
            conn.rollback()
            self.old_session[(self.phase, f"{what} refused {e.sqlstate}")] += 1

    def setup(self):
        a = self.args
        with psycopg.connect(a.dsn, autocommit=True) as conn:
            conn.execute(f"CREATE EXTENSION fencing VERSION '{a.old}'")
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)")
            conn.execute("SELECT fencing.protect('t')")
            conn.execute("CREATE TABLE p (id int, zone int, v int NOT NULL, PRIMARY KEY (id, zone))"
                         " PARTITION BY LIST (zone)")
            conn.execute("CREATE TABLE p1 PARTITION OF p FOR VALUES IN (1)")
            conn.execute("SELECT fencing.protect('p')")
            conn.execute("CREATE TABLE tr (id int PRIMARY KEY, v int NOT NULL)")
            conn.execute("SELECT fencing.protect('tr')")
            # 0.1.0 kept no floors and did not guard TRUNCATE (docs/operations.md).
            self.floors = a.old != "0.1.0"
        with self.connect() as conn:
            conn.execute("SELECT set_config('fencing.token', '500', true)")
            conn.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, 9) g")
            conn.execute("INSERT INTO t VALUES (100, 0)")
            conn.execute("INSERT INTO p SELECT g, 1, 0 FROM generate_series(1, 9) g")
            conn.commit()
            conn.execute("SELECT set_config('fencing.token', '700', true)")
            conn.execute("DELETE FROM t WHERE id = 100")  # its mark: 700
            conn.execute("INSERT INTO tr VALUES (1, 0)")
            conn.commit()
            if self.floors:
                conn.execute("SELECT set_config('fencing.token', '750', true)")
                conn.execute("TRUNCATE tr")  # a floor for new keys: 750
                conn.commit()
            self.args_lease = conn.execute("SELECT fencing.acquire('lease', 'holder', '1 hour')").fetchone()[0]
            conn.execute("SELECT fencing.fence('fence', 800)")
            conn.commit()
        self.setup_owner()

    # An ordinary role's table keyed by its own domain, with a mark: from
    # 0.1.0, the update reads the mark's key text back with the domain's
    # input, which runs its CHECK; that must run as the table's owner, never
    # as the superuser running the update (SECURITY.md).
    OWNER = "fencing_online_owner"

    def setup_owner(self):
        o = self.OWNER
        with psycopg.connect(self.args.dsn, autocommit=True) as conn:
            conn.execute(f"DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{o}')"
                         f" THEN CREATE ROLE {o}; END IF; END $$")
            conn.execute(f"ALTER ROLE {o} NOSUPERUSER")
            conn.execute(f"GRANT USAGE ON SCHEMA fencing TO {o}")
            conn.execute(f"CREATE SCHEMA o AUTHORIZATION {o}")
            conn.execute(f"SET ROLE {o}")
            conn.execute("CREATE DOMAIN o.k AS integer")
            conn.execute("CREATE TABLE o.t (id o.k PRIMARY KEY, v int NOT NULL)")
            conn.execute("SELECT fencing.protect('o.t')")
            conn.execute("CREATE TABLE o.ran_as (role name)")
            conn.execute("BEGIN")
            conn.execute("SELECT set_config('fencing.token', '500', true)")
            conn.execute("INSERT INTO o.t VALUES (1, 0)")
            conn.execute("COMMIT")
            conn.execute("BEGIN")
            conn.execute("SELECT set_config('fencing.token', '700', true)")
            conn.execute("DELETE FROM o.t WHERE id = 1")  # its mark: 700
            conn.execute("COMMIT")
            conn.execute(f"""CREATE FUNCTION o.check_key(integer) RETURNS boolean LANGUAGE plpgsql AS $f$
                BEGIN
                    INSERT INTO o.ran_as VALUES (current_user);
                    IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
                        EXECUTE 'ALTER ROLE {o} SUPERUSER';
                    END IF;
                    RETURN true;
                END $f$""")
            conn.execute("ALTER DOMAIN o.k ADD CONSTRAINT k_check CHECK (o.check_key(VALUE))")
            conn.execute("RESET ROLE")

    def verify_owner(self):
        o = self.OWNER
        with psycopg.connect(self.args.dsn, autocommit=True) as conn:
            if conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (o,)).fetchone()[0]:
                self.failures.append(f"{o} became a superuser: its domain CHECK ran as the update's role")
            ran_as = [r[0] for r in conn.execute("SELECT DISTINCT role FROM o.ran_as").fetchall()]
            if any(r != o for r in ran_as):
                self.failures.append(f"a domain CHECK of {o} ran as {ran_as}")
            try:
                conn.execute("BEGIN")
                conn.execute(f"SET LOCAL ROLE {o}")
                conn.execute("SELECT set_config('fencing.token', '600', true)")
                conn.execute("INSERT INTO o.t VALUES (1, 0)")
                self.failures.append(f"stale re-insert into {o}'s table accepted: its mark was lost")
            except psycopg.Error as e:
                if e.sqlstate != "23T01":
                    self.failures.append(f"stale re-insert into {o}'s table: {e.sqlstate} {e}")
            finally:
                conn.execute("ROLLBACK")
            conn.execute(f"DROP OWNED BY {o}")
            conn.execute(f"DROP ROLE {o}")

    def verify(self):
        with psycopg.connect(self.args.dsn, autocommit=True) as conn:
            version = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'fencing'").fetchone()[0]
            if version != self.args.new:
                self.failures.append(f"extension version {version}, not {self.args.new}")
            try:
                conn.execute("SELECT fencing.fence('fence', 799)")
                self.failures.append("fence 799 accepted after fence 800")
            except psycopg.Error as e:
                if e.sqlstate != "23T01":
                    self.failures.append(f"fence 799: {e.sqlstate}")
            token = conn.execute("SELECT token FROM fencing.resources WHERE resource = 'lease'").fetchone()[0]
            if token != self.args_lease:
                self.failures.append(f"lease token {token}, was {self.args_lease}")
            n = conn.execute("SELECT count(*) FROM fencing.protected_tables").fetchone()[0]
            if n != 4:
                self.failures.append(f"{n} protected tables, not 4")
        self.verify_owner()

    def main(self):
        a = self.args
        self.setup()
        old = self.connect()  # loads the old library now
        self.old_session_round(old)
        threads = [threading.Thread(target=self.writer, args=(w,), daemon=True) for w in range(1, a.writers + 1)]
        for th in threads:
            th.start()
        time.sleep(a.seconds)

        if a.install_new:
            self.phase = "new library installed"
            subprocess.run(a.install_new, shell=True, check=True)
            time.sleep(a.seconds)
            if old is not None:
                self.old_session_round(old)

        if a.restart:
            self.phase = "restart"
            subprocess.run(a.restart, shell=True, check=True)
            time.sleep(a.seconds)
            self.phase = "restarted"
            old = None  # the restart closed it
            time.sleep(a.seconds)

        self.phase = "during ALTER EXTENSION UPDATE"
        started = time.monotonic()
        try:
            with psycopg.connect(a.dsn, autocommit=True) as conn:
                conn.execute("ALTER EXTENSION fencing UPDATE")
        except psycopg.Error as e:
            self.failures.append(f"ALTER EXTENSION fencing UPDATE failed: {e.sqlstate} {e}")
        print(f"  ALTER EXTENSION fencing UPDATE took {time.monotonic() - started:.2f} s under load")
        self.phase = "updated"
        time.sleep(a.seconds)
        if old is not None:
            try:
                self.old_session_round(old)
            except psycopg.Error as e:
                self.failures.append(f"the old session lost its connection: {e}")
        self.stop.set()
        for th in threads:
            th.join()
        self.verify()

        for (phase, what, verdict), n in sorted(self.counts.items()):
            print(f"  {phase:32} {what:36} {verdict:5} {n:6}")
        for (phase, what), n in sorted(self.old_session.items()):
            print(f"  old session: {phase:28} {what:36} {n:6}")
        wrong = sum(n for (_, _, verdict), n in self.counts.items() if verdict == "WRONG")
        ok_updated = sum(n for (phase, _, verdict), n in self.counts.items() if phase == "updated" and verdict == "ok")
        for f in self.failures:
            print("  FAILURE:", f)
        passed = wrong == 0 and not self.failures and ok_updated > 0
        mode = "preload" if a.restart else "unloaded" if a.install_new else "current_library"
        print(f"test online_upgrade_{a.old.replace('.', '_')}_{mode} ... "
              f"{'ok' if passed else 'FAILED'}")
        return 0 if passed else 1


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dsn", required=True)
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--install-new", default="",
                        help="shell command installing the new library; empty: it is installed already")
    parser.add_argument("--restart", default="")
    parser.add_argument("--writers", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=2.0)
    return Run(parser.parse_args()).main()


if __name__ == "__main__":
    sys.exit(main())
