"""Seeded, time-bounded property test of the storage guard.

Several sessions run random transactions against protected tables: UPDATE,
DELETE, INSERT, upsert, MERGE, CTEs, key changes, partition moves, TRUNCATE,
fenced_update(), savepoints, REPEATABLE READ, a role under row-level
security, a trigger that skips some updates, and DETACH/ATTACH of a
partition, with random tokens (some fresh, many stale, some missing).

An AFTER trigger logs every row the tables accept, in the order the row
locks and unique-index waits serialized them, tagged with the statement that
wrote it.  The checker replays that log against a simple model of what the
guard must accept, and fails on:
  - an accepted write with a token below the key's high-water mark (its
    rows, its deletions, the table's TRUNCATE floors; strict mode: at or
    below);
  - an accepted write that presented no token, or another token than the
    one the statement presented; an UPDATE under fencing.token (but
    fenced_update()'s) that wrote another token than fencing.token;
  - a MERGE accepted whose WHEN MATCHED UPDATE actions disagree on the
    token column;
  - an error outside the documented set (and any lost connection).

It prints its seed and how many transactions each session ran;
--seed S --sessions 1 --transactions N replays one session's sequence
exactly (with several sessions the interleaving is the scheduler's).
"""

import argparse
import json
import random
import sys
import threading
import time

import psycopg

# Errors a statement may end with under this workload.
EXPECTED = {
    "23T01": "stale token",
    "23T02": "missing token",
    "22023": "two tokens in one write",
    "23505": "unique violation",
    "40001": "serialization failure",
    "40P01": "deadlock",
    "0A000": "mixed MERGE refused",
    "42501": "row-level security",
    "P0002": "fenced_update: no row",
    "55000": "fenced_update: row skipped",
    "21000": "MERGE affected a row twice",
    "27000": "row changed by a trigger of the statement",
    "55P03": "lock timeout",
    "57014": "statement timeout",
}

TABLES = {"mono": "monotonic", "strict": "strict", "parted": "monotonic", "tenant": "monotonic"}
KEYS = range(1, 7)
ZONES = range(3)

SETUP = """
DROP SCHEMA IF EXISTS prop CASCADE;
DO $$ BEGIN
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_property_rls') THEN
        DROP OWNED BY fencing_property_rls;
        DROP ROLE fencing_property_rls;
    END IF;
END $$;
CREATE ROLE fencing_property_rls;
CREATE SCHEMA prop;
GRANT USAGE ON SCHEMA prop, fencing TO fencing_property_rls;
CREATE TABLE prop.audit (seq bigserial PRIMARY KEY, stmt text, rel text, op text,
                         old_k int, old_zone int, new_k int, new_zone int, new_token bigint);
CREATE FUNCTION prop.audit_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog AS $$
BEGIN
    INSERT INTO prop.audit (stmt, rel, op, old_k, old_zone, new_k, new_zone, new_token)
    VALUES (current_setting('prop.stmt', true), TG_ARGV[0], TG_OP,
            (to_jsonb(OLD)->>'k')::int, (to_jsonb(OLD)->>'zone')::int,
            (to_jsonb(NEW)->>'k')::int, (to_jsonb(NEW)->>'zone')::int,
            (to_jsonb(NEW)->>'last_fencing_token')::bigint);
    RETURN NULL;
END $$;
CREATE FUNCTION prop.audit_truncate() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog AS $$
BEGIN
    INSERT INTO prop.audit (stmt, rel, op, old_zone)
    VALUES (current_setting('prop.stmt', true), TG_ARGV[0], 'TRUNCATE', nullif(TG_ARGV[1], 'all')::int);
    RETURN NULL;
END $$;
-- A trigger that skips some updates (as suppress_redundant_updates_trigger would).
CREATE FUNCTION prop.skip_some() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.v % 5 = 4 THEN NULL ELSE NEW END;
END $$;

CREATE TABLE prop.mono (k int PRIMARY KEY, v int NOT NULL DEFAULT 0, code int UNIQUE);
CREATE TABLE prop.strict (k int PRIMARY KEY, v int NOT NULL DEFAULT 0);
CREATE TABLE prop.tenant (k int PRIMARY KEY, v int NOT NULL DEFAULT 0);
CREATE TABLE prop.parted (k int, zone int, v int NOT NULL DEFAULT 0, PRIMARY KEY (k, zone))
    PARTITION BY LIST (zone);
CREATE TABLE prop.parted_0 PARTITION OF prop.parted FOR VALUES IN (0);
CREATE TABLE prop.parted_1 PARTITION OF prop.parted FOR VALUES IN (1);
CREATE TABLE prop.parted_2 PARTITION OF prop.parted FOR VALUES IN (2);
SELECT fencing.protect('prop.mono');
SELECT fencing.protect('prop.strict', mode => 'strict');
SELECT fencing.protect('prop.tenant');
SELECT fencing.protect('prop.parted');
CREATE TRIGGER z_skip BEFORE UPDATE ON prop.mono FOR EACH ROW EXECUTE FUNCTION prop.skip_some();
CREATE TRIGGER zzz_audit AFTER INSERT OR UPDATE OR DELETE ON prop.mono FOR EACH ROW EXECUTE FUNCTION prop.audit_row('mono');
CREATE TRIGGER zzz_audit AFTER INSERT OR UPDATE OR DELETE ON prop.strict FOR EACH ROW EXECUTE FUNCTION prop.audit_row('strict');
CREATE TRIGGER zzz_audit AFTER INSERT OR UPDATE OR DELETE ON prop.tenant FOR EACH ROW EXECUTE FUNCTION prop.audit_row('tenant');
CREATE TRIGGER zzz_audit AFTER INSERT OR UPDATE OR DELETE ON prop.parted FOR EACH ROW EXECUTE FUNCTION prop.audit_row('parted');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.mono FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('mono', 'all');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.strict FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('strict', 'all');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.tenant FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('tenant', 'all');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.parted FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('parted', 'all');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.parted_0 FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('parted', '0');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.parted_1 FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('parted', '1');
CREATE TRIGGER zzz_audit_truncate AFTER TRUNCATE ON prop.parted_2 FOR EACH STATEMENT EXECUTE FUNCTION prop.audit_truncate('parted', '2');
ALTER TABLE prop.tenant ENABLE ROW LEVEL SECURITY;
CREATE POLICY even ON prop.tenant USING (k % 2 = 0) WITH CHECK (k % 2 = 0);
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA prop TO fencing_property_rls;
"""


class Statement:
    """One generated statement and what it presents."""

    def __init__(self, sql, kind, table, explicit, mixed_merge=False, lends_to_key=None):
        self.sql = sql
        self.kind = kind
        self.table = table
        self.explicit = set(explicit)  # 'INSERT'/'UPDATE': its rows carry their own token
        self.mixed_merge = mixed_merge
        # An upsert whose conflict may be with another key: its proposed token
        # is lent to the conflicting row only if that row has this key.
        self.lends_to_key = lends_to_key
        self.txn_token = None  # fencing.token in effect in its transaction
        self.outcome = None  # 'ok' or a SQLSTATE


class Generator:
    """Random transactions, one stream per session."""

    def __init__(self, rng, clock):
        self.rng = rng
        self.clock = clock

    def token(self):
        now = self.clock.now()
        r = self.rng.random()
        if r < 0.45:
            return self.clock.tick()
        return max(1, now - self.rng.randint(0, 12))

    def key(self):
        return self.rng.choice(KEYS)

    def table(self):
        return self.rng.choice(["mono", "mono", "strict", "tenant", "parted", "parted"])

    def where(self, table, k, zone=None):
        if table == "parted":
            z = self.rng.choice(ZONES) if zone is None else zone
            return f"k = {k} AND zone = {z}"
        return f"k = {k}"

    def row(self, table, k, token):
        cols = "k, zone, v" if table == "parted" else "k, v"
        vals = f"{k}, {self.rng.choice(ZONES)}, 0" if table == "parted" else f"{k}, 0"
        if token is not None:
            return f"({cols}, last_fencing_token)", f"({vals}, {token})"
        return f"({cols})", f"({vals})"

    def statement(self):
        r = self.rng
        t = self.table()
        k = self.key()
        explicit = r.random() < 0.5
        tok = self.token() if explicit else None
        settok = f", last_fencing_token = {tok}" if explicit else ""
        choice = r.randrange(15)
        if choice <= 2:
            return Statement(f"UPDATE prop.{t} SET v = v + 1{settok} WHERE {self.where(t, k)}",
                             "update", t, {"UPDATE"} if explicit else ())
        if choice == 3:
            keys = ", ".join(str(self.key()) for _ in range(3))
            return Statement(f"UPDATE prop.{t} SET v = v + 1{settok} WHERE k IN ({keys})",
                             "update", t, {"UPDATE"} if explicit else ())
        if choice == 4:
            return Statement(f"DELETE FROM prop.{t} WHERE {self.where(t, k)}", "delete", t, ())
        if choice == 5:
            cols, vals = self.row(t, k, tok)
            return Statement(f"INSERT INTO prop.{t} {cols} VALUES {vals}", "insert", t, {"INSERT"} if explicit else ())
        if choice == 6:
            # Upsert: without a token in DO UPDATE, the conflicting row borrows the proposed one's.
            tok = self.token()
            cols, vals = self.row(t, k, tok)
            target = "(k, zone)" if t == "parted" else "(k)"
            assign = ", last_fencing_token = excluded.last_fencing_token" if r.random() < 0.5 else ""
            if t == "mono" and r.random() < 0.5:
                # A conflict on another unique column: a conflicting row with another key
                # may not borrow the proposed token; one with the proposed key does.
                code = r.choice(KEYS)
                return Statement(f"INSERT INTO prop.mono (k, v, code, last_fencing_token) "
                                 f"VALUES ({k}, 0, {code}, {tok}) ON CONFLICT (code) "
                                 f"DO UPDATE SET v = prop.mono.v + 1{assign}", "upsert", t,
                                 {"INSERT", "UPDATE"} if assign else {"INSERT"}, lends_to_key=k)
            return Statement(f"INSERT INTO prop.{t} {cols} VALUES {vals} ON CONFLICT {target} "
                             f"DO UPDATE SET v = prop.{t}.v + 1{assign}", "upsert", t, {"INSERT", "UPDATE"})
        if choice == 7:
            return self.merge(t, tok)
        if choice == 8:
            # Key change (a DELETE of the old key and an INSERT of the new one).
            k2 = self.key()
            col = "zone" if t == "parted" and r.random() < 0.6 else "k"
            new = r.choice(ZONES) if col == "zone" else k2
            kind = "move" if col == "zone" else "update"
            return Statement(f"UPDATE prop.{t} SET {col} = {new}{settok} WHERE {self.where(t, k)}",
                             kind, t, {"INSERT", "UPDATE"} if explicit else ())
        if choice == 9:
            # CTEs: a write in one part must not lend its token to another.
            k2 = self.key()
            cols, vals = self.row(t, k2, tok)
            if r.random() < 0.5:
                return Statement(f"WITH d AS (DELETE FROM prop.{t} WHERE {self.where(t, k)} RETURNING k) "
                                 f"INSERT INTO prop.{t} {cols} SELECT * FROM (VALUES {vals}) v "
                                 f"WHERE EXISTS (SELECT FROM d)", "cte", t, {"INSERT"} if explicit else ())
            itok = self.token()
            cols, vals = self.row(t, k2, itok)
            return Statement(f"WITH i AS (INSERT INTO prop.{t} {cols} VALUES {vals} "
                             f"ON CONFLICT DO NOTHING RETURNING k) "
                             f"UPDATE prop.{t} SET v = v + 1{settok} WHERE {self.where(t, k)}",
                             "cte", t, {"INSERT", "UPDATE"} if explicit else {"INSERT"})
        if choice == 10:
            key = {"k": k, "zone": r.choice(ZONES)} if t == "parted" else {"k": k}
            changes = {"v": r.randint(0, 9)}
            on_stale = r.choice(["error", "skip"])
            return Statement(f"SELECT fencing.fenced_update('prop.{t}', '{json.dumps(key)}', "
                             f"{self.token()}, '{json.dumps(changes)}', '{on_stale}')",
                             "fenced", t, {"UPDATE"})
        if choice == 11 and r.random() < 0.15:
            target = t if t != "parted" or r.random() < 0.5 else f"parted_{r.choice(ZONES)}"
            return Statement(f"TRUNCATE prop.{target}", "truncate", t, ())
        if choice == 12 and r.random() < 0.1:
            return Statement("ALTER TABLE prop.parted DETACH PARTITION prop.parted_2; "
                             "ALTER TABLE prop.parted ATTACH PARTITION prop.parted_2 FOR VALUES IN (2)",
                             "ddl", "parted", ())
        return Statement(f"UPDATE prop.{t} SET v = v + {r.randint(1, 4)}{settok} WHERE {self.where(t, k)}",
                         "update", t, {"UPDATE"} if explicit else ())

    def merge(self, t, tok):
        r = self.rng
        keys = sorted({self.key() for _ in range(2)})
        source = ", ".join(f"({k})" for k in keys)
        on = "t.k = s.k AND t.zone = 1" if t == "parted" else "t.k = s.k"
        first = r.random() < 0.5
        second = r.random() < 0.5
        t1 = f", last_fencing_token = {tok or self.token()}" if first else ""
        t2 = f", last_fencing_token = {tok or self.token()}" if second else ""
        second_action = (f"UPDATE SET v = t.v + 2{t2}" if r.random() < 0.6 else "DELETE")
        mixed = second_action.startswith("UPDATE") and first != second
        explicit = first and (second or second_action == "DELETE")
        ins_cols = "(k, zone, v" if t == "parted" else "(k, v"
        ins_vals = "(s.k, 1, 0" if t == "parted" else "(s.k, 0"
        itok = ""
        if explicit:
            ins_cols += ", last_fencing_token"
            itok = f", {tok or self.token()}"
        sql = (f"MERGE INTO prop.{t} t USING (VALUES {source}) s(k) ON {on} "
               f"WHEN MATCHED AND s.k % 2 = 0 THEN UPDATE SET v = t.v + 1{t1} "
               f"WHEN MATCHED THEN {second_action} "
               f"WHEN NOT MATCHED THEN INSERT {ins_cols}) VALUES {ins_vals}{itok})")
        return Statement(sql, "merge", t, {"INSERT", "UPDATE"} if explicit else (), mixed_merge=mixed)


class Clock:
    """The lock manager's counter: tokens mostly grow, stale holders keep old ones."""

    def __init__(self):
        self.lock = threading.Lock()
        self.value = 1

    def tick(self):
        with self.lock:
            self.value += 1
            return self.value

    def now(self):
        with self.lock:
            return self.value


class Session(threading.Thread):
    def __init__(self, index, dsn, seed, deadline, clock, log, stop, transactions):
        super().__init__(daemon=True)
        self.index = index
        self.dsn = dsn
        self.rng = random.Random(seed * 1000 + index)
        self.gen = Generator(self.rng, clock)
        self.deadline = deadline
        self.log = log
        self.stop = stop
        self.failures = []
        self.counter = 0
        self.transactions = 0
        self.limit = transactions

    def run(self):
        try:
            with psycopg.connect(self.dsn, autocommit=True) as conn:
                conn.execute("SET statement_timeout = '10s'; SET lock_timeout = '3s'")
                while not self.stop.is_set():
                    if self.limit is not None and self.transactions >= self.limit:
                        break
                    if self.limit is None and time.monotonic() >= self.deadline:
                        break
                    self.transactions += 1
                    self.transaction(conn)
        except psycopg.OperationalError as e:
            self.failures.append(f"session {self.index}: connection lost: {e}")
            self.stop.set()

    def transaction(self, conn):
        r = self.rng
        level = " ISOLATION LEVEL REPEATABLE READ" if r.random() < 0.1 else ""
        conn.execute("BEGIN" + level)
        txn_token = None
        try:
            if r.random() < 0.15:
                conn.execute("SET LOCAL ROLE fencing_property_rls")
            if r.random() < 0.7:
                txn_token = self.gen.token()
                if r.random() < 0.5:
                    conn.execute(f"SET LOCAL fencing.token = {txn_token}")
                else:
                    conn.execute("SELECT set_config('fencing.token', %s, true)", (str(txn_token),))
            for _ in range(r.randint(1, 4)):
                st = self.gen.statement()
                st.txn_token = txn_token
                self.counter += 1
                sid = f"{self.index}.{self.counter}"
                self.log[sid] = st
                savepoint = r.random() < 0.25
                if savepoint:
                    conn.execute("SAVEPOINT s")
                conn.execute("SELECT set_config('prop.stmt', %s, true)", (sid,))
                try:
                    conn.execute(st.sql)
                    st.outcome = "ok"
                    if savepoint and r.random() < 0.5:
                        conn.execute("ROLLBACK TO SAVEPOINT s")
                        st.outcome = "rolled back"
                except psycopg.Error as e:
                    st.outcome = e.sqlstate or "?"
                    if e.sqlstate not in EXPECTED:
                        self.failures.append(f"unexpected {e.sqlstate}: {e}\n    in: {st.sql}")
                    if not savepoint:
                        raise
                    conn.execute("ROLLBACK TO SAVEPOINT s")
            conn.execute("COMMIT" if r.random() < 0.85 else "ROLLBACK")
        except psycopg.Error:
            if not conn.closed:
                conn.execute("ROLLBACK")


def bar_rule(mode, token, bar):
    return token > bar if mode == "strict" else token >= bar


def check(audit, log, final):
    """Replays the accepted writes against the model; returns violations."""
    violations = []
    hwm = {}  # (table, k, zone) -> highest token accepted
    floors = {}  # (table, zone or None) -> TRUNCATE floor
    exists = set()

    def bar(key):
        t, _, zone = key
        return max(hwm.get(key, 0), floors.get((t, None), 0),
                   floors.get((t, zone), 0) if zone is not None else 0)

    def fail(row, message):
        st = log.get(row["stmt"])
        violations.append(f"{message}\n    audit: {row}\n    statement: {st.sql if st else '?'}"
                          f" (fencing.token {st.txn_token if st else '?'})")

    move_tokens = {}
    for row in audit:
        if row["op"] == "INSERT":
            move_tokens[(row["stmt"], row["new_k"])] = row["new_token"]

    for row in audit:
        st = log.get(row["stmt"])
        t = row["rel"]
        mode = TABLES[t]
        if st is None:
            fail(row, "a write no statement of the test made")
            continue
        if st.mixed_merge:
            fail(row, "a MERGE with mixed token assignments was accepted")
        if row["op"] == "TRUNCATE":
            if st.txn_token is None:
                fail(row, "TRUNCATE accepted without a token")
                continue
            zone = row["old_zone"]
            for key in list(exists):
                if key[0] == t and (zone is None or key[2] == zone):
                    if not bar_rule(mode, st.txn_token, hwm.get(key, 0)):
                        fail(row, f"TRUNCATE under {st.txn_token} over row {key} holding {hwm.get(key)}")
                    exists.discard(key)
            floors[(t, zone)] = max(floors.get((t, zone), 0), st.txn_token)
            continue
        if row["op"] == "DELETE":
            key = (t, row["old_k"], row["old_zone"])
            if st.kind == "move":
                presented = move_tokens.get((row["stmt"], row["old_k"]))
            else:
                presented = st.txn_token
            if presented is None:
                fail(row, "DELETE accepted without a token")
                continue
            if not bar_rule(mode, presented, hwm.get(key, 0)):
                fail(row, f"stale DELETE: {presented} after {hwm.get(key, 0)}")
            hwm[key] = max(hwm.get(key, 0), presented)
            exists.discard(key)
            continue
        presented = row["new_token"]
        lent = row["op"] == "UPDATE" and st.lends_to_key is not None and row["old_k"] == st.lends_to_key
        if row["op"] not in st.explicit and not lent:
            if st.txn_token is None:
                fail(row, f"{row['op']} accepted without a token")
            elif presented != st.txn_token:
                fail(row, f"{row['op']} wrote {presented}, the transaction presented {st.txn_token}")
        if (row["op"] == "UPDATE" and st.txn_token is not None and st.kind != "fenced"
                and presented != st.txn_token):
            # An assigned token beside fencing.token is the row's own (a
            # write-back: fencing.token applies), fencing.token, or refused.
            fail(row, f"UPDATE under fencing.token {st.txn_token} wrote {presented}")
        new_key = (t, row["new_k"], row["new_zone"])
        if row["op"] == "UPDATE":
            old_key = (t, row["old_k"], row["old_zone"])
            if not bar_rule(mode, presented, hwm.get(old_key, 0)):
                fail(row, f"stale UPDATE: {presented} after {hwm.get(old_key, 0)}")
            hwm[old_key] = max(hwm.get(old_key, 0), presented)
            if old_key != new_key:
                exists.discard(old_key)
                if not bar_rule(mode, presented, bar(new_key)):
                    fail(row, f"key change to a key that must follow {bar(new_key)}: {presented}")
        else:
            if not bar_rule(mode, presented, bar(new_key)):
                fail(row, f"stale INSERT: {presented} after {bar(new_key)}")
        hwm[new_key] = max(hwm.get(new_key, 0), presented)
        exists.add(new_key)
    # The tables hold exactly the rows the log says, each with its key's last token.
    if exists != set(final):
        violations.append(f"rows differ from the log: only in the log {sorted(exists - set(final))[:5]}, "
                          f"only in the tables {sorted(set(final) - exists)[:5]}")
    for key, token in final.items():
        if key in exists and token != hwm.get(key):
            violations.append(f"row {key} holds token {token}, its last accepted write was {hwm.get(key)}")
    return violations


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--transactions", type=int, default=None,
                        help="per session, instead of --seconds (for replays)")
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"property: seed {seed}, {args.sessions} sessions, {args.seconds:g} s "
          f"(replay: --seed {seed} --sessions 1)", flush=True)

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(SETUP)

    clock = Clock()
    log = {}
    stop = threading.Event()
    deadline = time.monotonic() + args.seconds
    sessions = [Session(i, args.dsn, seed, deadline, clock, log, stop, args.transactions)
                for i in range(args.sessions)]
    if args.sessions == 1:
        sessions[0].run()
    else:
        for s in sessions:
            s.start()
        for s in sessions:
            s.join()

    failures = [f for s in sessions for f in s.failures]
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT * FROM prop.audit ORDER BY seq")
        names = [d.name for d in cur.description]
        audit = [dict(zip(names, r)) for r in cur.fetchall()]
        final = {}
        for t in TABLES:
            zone = "zone" if t == "parted" else "NULL::int"
            for k, z, tok in conn.execute(f"SELECT k, {zone}, last_fencing_token FROM prop.{t}"):
                final[(t, k, z)] = tok
    violations = check(audit, log, final)

    outcomes = {}
    for st in log.values():
        if st.outcome is not None:
            outcomes[st.outcome] = outcomes.get(st.outcome, 0) + 1
    print(f"statements: {sum(outcomes.values())}, accepted rows audited: {len(audit)}, "
          f"transactions per session: {[s.transactions for s in sessions]}")
    for outcome, n in sorted(outcomes.items(), key=lambda x: -x[1]):
        print(f"  {outcome:12} {n:7}  {EXPECTED.get(outcome, '')}")
    for message in failures + violations:
        print("VIOLATION:", message)
    ok = not failures and not violations and len(audit) > 0 and outcomes.get("23T01", 0) > 0
    if len(audit) == 0 or outcomes.get("23T01", 0) == 0:
        print("VIOLATION: the run accepted or refused nothing; the test did not test")
    print(f"test property_model ... {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
