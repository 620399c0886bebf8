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

DDL, interleaved with the writes (each in a transaction of its own, with
weight --ddl-weight): fencing.protect() again with another mode,
fencing.unprotect(), primary key changes (other columns, another column
order) and key column type changes (int/bigint/numeric, text/varchar), each
while protected and inside an unprotect ... protect window, DETACH/ATTACH
PARTITION, and fencing.compact(table, below) or CALL
fencing.compact_in_batches(table, below, batch) (committing a batch at a
time while the other sessions write) with a floor below every live
holder's token.  Each DDL notes itself in the same log (prop.note()), so the
checker replays it in order with the writes; the model then also fails on:
  - a stale re-insert: a key deleted under token t (while protected)
    inserted while protected under a token older than t, whatever DDL
    happened in between (marks are never reset by the model);
  - an accepted write, while protected, below the table's compact() floor,
    or leaving a row's stored token lower than it was;
  - a refusal (23T01) the model cannot explain: its stored token must be one
    the key, the table's floors or the transaction's own writes had;
    refusals by a floor that a key identity change (protect(), a primary key
    or key type change) may raise are allowed only for tokens at or below the
    highest mark the table had then, and counted apart ("DDL-conservative");
    a 23T02 in a transaction that set fencing.token;
  - a DDL error outside the documented set.
Writes while a table is unprotected are not checked; they set the row's
stored token (the guard has nothing else to go on when protected again).

Beside them (weight --side-weight), transactions on two more tables, logged
apart (prop.side_audit) and checked by side_check(): prop.report, protected
with enforce => false, takes writes with fresh, stale and missing tokens;
prop.maint, enforcing, with a maintainer, takes token writes and maintenance
transactions (fencing.maintenance on, no token) as its owner, as its
maintainer and as a role that is neither.  The model fails on:
  - a stored token that went down: an UPDATE that wrote a lower token than
    the row had, an INSERT below its key's last deletion (report-only mode
    keeps the stored token, it never lowers it);
  - a maintenance write that moved a token (an UPDATE that changed it, an
    INSERT that did not take its key's mark);
  - a maintenance write accepted from the role that is neither owner nor
    maintainer (it must end with 42501), or one refused from the others.

It prints its seed and how many transactions each session ran;
--seed S --sessions 1 --transactions N replays one session's sequence
exactly (with several sessions the interleaving is the scheduler's).
On a violation it prints the key's history (writes and DDL of its table):
the schedule that shows it.

Options:
  --seconds S        run for S seconds (default 60)
  --seed N           the seed (default: random, printed)
  --sessions N       concurrent sessions (default 4)
  --transactions N   per session, instead of --seconds (for replays)
  --ddl-weight W     probability that a transaction is DDL (default 0.03;
                     0 runs the writes-only workload of before)
  --side-weight W    probability that a transaction is one on prop.report or
                     prop.maint (default 0.15; 0: none)
  --dsn DSN          libpq connection string
"""

import argparse
import collections
import decimal
import json
import re
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

# Errors a DDL transaction may end with.
DDL_EXPECTED = {
    "55P03": "lock timeout",
    "57014": "statement timeout",
    "40P01": "deadlock",
    "40001": "serialization failure",
    "0A000": "key type change refused while protected (the guard depends on the key)",
    "55000": "refused while protected / compact() of an unprotected table",
}
# Write errors that DDL explains, by statement kind.
DDL_WRITE_EXPECTED = {
    ("fenced", "22023"): "fenced_update(): the key names no longer the primary key's columns",
}

PKEYS = {"mono": ["k", "k, c", "c, k"], "strict": ["k", "k, c", "c, k"], "tenant": ["k", "k, c", "c, k"],
         "parted": ["k, zone", "zone, k", "k, zone, c", "c, zone, k"]}
# Key column types: tenant's k is in a policy (its type cannot change); zone is the partition key.
KEY_TYPES = {"k": ["int", "bigint", "numeric"], "c": ["text", "varchar(8)"]}
EVENTS = {"PROTECT", "UNPROTECT", "PKEY", "TYPE", "COMPACT", "DETACH"}

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
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'fencing_property_maint') THEN
        DROP OWNED BY fencing_property_maint;
        DROP ROLE fencing_property_maint;
    END IF;
END $$;
CREATE ROLE fencing_property_rls;
CREATE ROLE fencing_property_maint;
CREATE SCHEMA prop;
GRANT USAGE ON SCHEMA prop, fencing TO fencing_property_rls, fencing_property_maint;
CREATE TABLE prop.audit (seq bigserial PRIMARY KEY, stmt text, rel text, op text,
                         old_k int, old_zone int, new_k int, new_zone int, new_token bigint,
                         info text);
-- A DDL notes itself in the log, in its own transaction, after the DDL took its locks.
CREATE FUNCTION prop.note(rel text, op text, info text, token bigint) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS $$
    INSERT INTO prop.audit (stmt, rel, op, info, new_token)
    VALUES (current_setting('prop.stmt', true), rel, op, info, token)
$$;
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
-- CALL fencing.compact_in_batches() commits its floor in a transaction of
-- its own, before its batches: a trigger on the floors notes it there, for
-- the session whose prop.batch_note names the table.
CREATE FUNCTION prop.note_floor() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog AS $$
BEGIN
    IF current_setting('prop.batch_note', true) = 'prop.' || NEW.relid::regclass::text
       OR current_setting('prop.batch_note', true) = NEW.relid::regclass::text THEN
        PERFORM prop.note(split_part(current_setting('prop.batch_note'), '.', 2), 'COMPACT', NULL,
                          NEW.compacted);
    END IF;
    RETURN NULL;
END $$;
CREATE TRIGGER note_floor AFTER INSERT OR UPDATE ON fencing.floors
    FOR EACH ROW EXECUTE FUNCTION prop.note_floor();
-- A trigger that skips some updates (as suppress_redundant_updates_trigger would).
CREATE FUNCTION prop.skip_some() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.v % 5 = 4 THEN NULL ELSE NEW END;
END $$;

-- c is always 'a': a primary key with it names the same rows, for key changes.
-- The unique indexes keep ON CONFLICT (k) / (k, zone) valid whatever the key.
CREATE TABLE prop.mono (k int PRIMARY KEY, v int NOT NULL DEFAULT 0, code int UNIQUE,
                        c text NOT NULL DEFAULT 'a');
CREATE TABLE prop.strict (k int PRIMARY KEY, v int NOT NULL DEFAULT 0, c text NOT NULL DEFAULT 'a');
CREATE TABLE prop.tenant (k int PRIMARY KEY, v int NOT NULL DEFAULT 0, c text NOT NULL DEFAULT 'a');
CREATE TABLE prop.parted (k int, zone int, v int NOT NULL DEFAULT 0, c text NOT NULL DEFAULT 'a',
                          PRIMARY KEY (k, zone))
    PARTITION BY LIST (zone);
CREATE UNIQUE INDEX mono_k ON prop.mono (k);
CREATE UNIQUE INDEX strict_k ON prop.strict (k);
CREATE UNIQUE INDEX tenant_k ON prop.tenant (k);
CREATE UNIQUE INDEX parted_k ON prop.parted (k, zone);
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

-- The side tables (side_check()): report-only, and enforcing with a maintainer.
CREATE TABLE prop.side_audit (seq bigserial PRIMARY KEY, stmt text, rel text, op text,
                              old_k int, new_k int, old_token bigint, new_token bigint,
                              maintenance text, role text, txn_token text);
CREATE FUNCTION prop.side_row() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path = pg_catalog AS $$
BEGIN
    INSERT INTO prop.side_audit (stmt, rel, op, old_k, new_k, old_token, new_token, maintenance, role,
                                 txn_token)
    VALUES (current_setting('prop.stmt', true), TG_ARGV[0], TG_OP,
            (to_jsonb(OLD)->>'k')::int, (to_jsonb(NEW)->>'k')::int,
            (to_jsonb(OLD)->>'last_fencing_token')::bigint,
            (to_jsonb(NEW)->>'last_fencing_token')::bigint,
            current_setting('fencing.maintenance', true), current_setting('role'),
            current_setting('fencing.token', true));
    RETURN NULL;
END $$;
CREATE TABLE prop.report (k int PRIMARY KEY, v int NOT NULL DEFAULT 0);
CREATE TABLE prop.maint (k int PRIMARY KEY, v int NOT NULL DEFAULT 0);
SELECT fencing.protect('prop.report', enforce => false);
SELECT fencing.protect('prop.maint');
SELECT fencing.set_maintainer('prop.maint', 'fencing_property_maint');
CREATE TRIGGER zzz_side AFTER INSERT OR UPDATE OR DELETE ON prop.report FOR EACH ROW EXECUTE FUNCTION prop.side_row('report');
CREATE TRIGGER zzz_side AFTER INSERT OR UPDATE OR DELETE ON prop.maint FOR EACH ROW EXECUTE FUNCTION prop.side_row('maint');
GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON ALL TABLES IN SCHEMA prop TO fencing_property_rls;
GRANT SELECT, INSERT, UPDATE, DELETE ON prop.report, prop.maint TO fencing_property_maint;
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
        self.detail = None  # DETAIL of its error
        self.hi = None  # the log's sequence after its transaction: it ran before this
        self.own = 0  # the highest token its transaction presented (its own writes)
        # The log's sequence right after each DETACH/ATTACH its transaction ran before it
        # (under that DDL's lock): the floor that DETACH left is the transaction's own,
        # and goes with the note if the transaction rolls back.
        self.own_detaches = []


class Generator:
    """Random transactions, one stream per session."""

    def __init__(self, rng, clock, live):
        self.rng = rng
        self.clock = clock
        self.live = live  # the tokens of the session's transaction (compact() stays below them)

    def token(self):
        with self.clock.lock:
            now = self.clock.value
            if self.rng.random() < 0.45:
                self.clock.value += 1
                token = self.clock.value
            else:
                token = max(1, now - self.rng.randint(0, 12))
            self.live.append(token)
        return token

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
                             "SELECT prop.note('parted', 'DETACH', '2', NULL); "
                             "ALTER TABLE prop.parted ATTACH PARTITION prop.parted_2 FOR VALUES IN (2)",
                             "ddl", "parted", ())
        return Statement(f"UPDATE prop.{t} SET v = v + {r.randint(1, 4)}{settok} WHERE {self.where(t, k)}",
                         "update", t, {"UPDATE"} if explicit else ())

    def ddl_plan(self):
        """One DDL, or an unprotect ... protect window: a list of steps (kind, table, arg).
        Often wrapped by a zombie: a key deleted under a fresh token before the DDL, and
        inserted after it under a token older than that deletion (which must be refused)."""
        plan = self.ddl_steps()
        if self.rng.random() < 0.6:
            t = plan[0][1]
            k = self.key()
            plan = [("zombie-delete", t, k)] + plan + [("zombie-insert", t, k)]
        return plan

    def ddl_steps(self):
        r = self.rng
        t = self.table()
        mode = r.choice(["monotonic", "strict"])
        x = r.random()
        if x < 0.15:
            return [("protect", t, mode)]  # again, maybe with another mode
        if x < 0.25:
            return [("unprotect", t, None), ("protect", t, mode)]
        if x < 0.45:
            return [("unprotect", t, None), ("pkey", t, r.choice(PKEYS[t])), ("protect", t, mode)]
        if x < 0.62:
            return [("unprotect", t, None), self.type_change(t), ("protect", t, mode)]
        if x < 0.72:
            return [("pkey", t, r.choice(PKEYS[t]))]
        if x < 0.8:
            return [self.type_change(t)]
        if x < 0.92:
            return [(r.choice(["compact", "compact_batches"]), t, None)]
        return [("detach", "parted", None)]

    def type_change(self, t):
        col = "c" if t == "tenant" or self.rng.random() < 0.3 else "k"
        return ("type", t, f"{col} {self.rng.choice(KEY_TYPES[col])}")

    def ddl_sql(self, kind, t, arg, floor=None):
        note = f"SELECT prop.note('{t}', '{{op}}', {{info}}, {{token}})"
        if kind == "protect":
            return (f"SELECT fencing.protect('prop.{t}', mode => '{arg}'); "
                    + note.format(op="PROTECT", info=f"'{arg}'", token="NULL"))
        if kind == "unprotect":
            return f"SELECT fencing.unprotect('prop.{t}'); " + note.format(op="UNPROTECT", info="NULL", token="NULL")
        if kind == "pkey":
            return (f"ALTER TABLE prop.{t} DROP CONSTRAINT {t}_pkey, ADD PRIMARY KEY ({arg}); "
                    + note.format(op="PKEY", info=f"'{arg}'", token="NULL"))
        if kind == "type":
            col, typ = arg.split(" ", 1)
            return (f"ALTER TABLE prop.{t} ALTER COLUMN {col} TYPE {typ}; "
                    + note.format(op="TYPE", info=f"'{arg}'", token="NULL"))
        if kind == "compact":
            return f"SELECT fencing.compact('prop.{t}', {floor}); " + note.format(op="COMPACT", info="NULL", token=floor)
        if kind == "compact_batches":
            # A CALL (ddl()), noted by a trigger as its floor commits.
            return f"CALL fencing.compact_in_batches('prop.{t}', {floor})"
        return ("ALTER TABLE prop.parted DETACH PARTITION prop.parted_2; "
                "SELECT prop.note('parted', 'DETACH', '2', NULL); "
                "ALTER TABLE prop.parted ATTACH PARTITION prop.parted_2 FOR VALUES IN (2)")

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
        self.lives = []  # each session's live tokens

    def tick(self):
        with self.lock:
            self.value += 1
            return self.value

    def now(self):
        with self.lock:
            return self.value

    def compact_floor(self):
        """A floor below every live holder's token and every token the generator may still draw."""
        with self.lock:
            lows = [min(live) for live in self.lives if live]
            return min([self.value - 12] + lows) - 1


class Session(threading.Thread):
    def __init__(self, index, dsn, seed, deadline, clock, log, stop, transactions, ddl_weight,
                 side_weight=0.0, side_log=None):
        super().__init__(daemon=True)
        self.index = index
        self.dsn = dsn
        self.rng = random.Random(seed * 1000 + index)
        self.clock = clock
        self.live = []
        clock.lives.append(self.live)
        self.gen = Generator(self.rng, clock, self.live)
        self.deadline = deadline
        self.log = log
        self.stop = stop
        self.failures = []
        self.counter = 0
        self.transactions = 0
        self.limit = transactions
        self.ddl_weight = ddl_weight
        self.side_weight = side_weight
        self.side_log = side_log if side_log is not None else {}
        self.pending = collections.deque()  # DDL steps still to run (an unprotect ... protect window)
        self.zombies = {}  # (table, key) -> the token a zombie step deleted it under

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
                    if self.pending and self.rng.random() < 0.5:
                        self.ddl(conn, *self.pending.popleft())
                    elif self.ddl_weight and self.rng.random() < self.ddl_weight:
                        self.pending.extend(self.gen.ddl_plan())
                        self.ddl(conn, *self.pending.popleft())
                    elif self.side_weight and self.rng.random() < self.side_weight:
                        self.side_transaction(conn)
                    else:
                        self.transaction(conn)
                # A window left open is closed: the tables end protected.
                while self.pending and not self.stop.is_set():
                    self.ddl(conn, *self.pending.popleft())
        except psycopg.OperationalError as e:
            self.failures.append(f"session {self.index}: connection lost: {e}")
            self.stop.set()

    def next_sid(self):
        self.counter += 1
        return f"{self.index}.{self.counter}"

    def high_seq(self, conn):
        return conn.execute("SELECT last_value FROM prop.audit_seq_seq").fetchone()[0]

    def zombie(self, conn, kind, t, k):
        """A write of its own transaction, around DDL: see Generator.ddl_plan()."""
        if kind == "zombie-delete":
            token = self.clock.tick()
            self.zombies[(t, k)] = token
            st = Statement(f"DELETE FROM prop.{t} WHERE k = {k}", "delete", t, ())
        else:
            deleted = self.zombies.pop((t, k), None)
            if deleted is None:
                return
            token = max(1, deleted - self.rng.randint(1, 5))
            cols, vals = self.gen.row(t, k, token)
            st = Statement(f"INSERT INTO prop.{t} {cols} VALUES {vals}", "insert", t, {"INSERT"})
        with self.clock.lock:
            self.live.append(token)
        st.txn_token = token
        sid = self.next_sid()
        self.log[sid] = st
        try:
            conn.execute("BEGIN")
            conn.execute(f"SET LOCAL fencing.token = {token}")
            conn.execute("SELECT set_config('prop.stmt', %s, true)", (sid,))
            try:
                conn.execute(st.sql)
            except psycopg.Error as e:
                st.detail = e.diag.message_detail
                st.own = token
                raise
            conn.execute("COMMIT")
            st.outcome = "ok"
        except psycopg.Error as e:
            st.outcome = e.sqlstate or "?"
            if e.sqlstate not in EXPECTED:
                self.failures.append(f"unexpected {e.sqlstate}: {e}\n    in: {st.sql}")
            if not conn.closed:
                conn.execute("ROLLBACK")
                st.hi = self.high_seq(conn)
        finally:
            with self.clock.lock:
                self.live.clear()

    def ddl(self, conn, kind, t, arg, attempt=0):
        if kind.startswith("zombie"):
            self.zombie(conn, kind, t, arg)
            return
        floor = None
        if kind in ("compact", "compact_batches"):
            floor = self.clock.compact_floor()
            if floor < 1:
                return
        st = Statement(self.gen.ddl_sql(kind, t, arg, floor), "ddl", t, ())
        st.ddl = kind
        sid = self.next_sid()
        self.log[sid] = st
        try:
            if kind == "compact_batches":
                # A batch per transaction, while the other sessions write; the
                # trigger prop.note_floor() notes the floor as it commits.
                conn.execute("SELECT set_config('prop.stmt', %s, false),"
                             " set_config('prop.batch_note', %s, false)", (sid, f"prop.{t}"))
                try:
                    conn.execute(f"CALL fencing.compact_in_batches('prop.{t}', {floor}, "
                                 f"{self.rng.choice([1, 3, 50])})")
                finally:
                    conn.execute("RESET prop.batch_note; RESET prop.stmt")
                st.outcome = "ok"
                return
            conn.execute("BEGIN")
            conn.execute("SELECT set_config('prop.stmt', %s, true)", (sid,))
            conn.execute(st.sql)
            conn.execute("COMMIT")
            st.outcome = "ok"
        except psycopg.Error as e:
            st.outcome = e.sqlstate or "?"
            if e.sqlstate not in DDL_EXPECTED:
                self.failures.append(f"unexpected DDL error {e.sqlstate}: {e}\n    in: {st.sql}")
            if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                conn.execute("ROLLBACK")
            # A window's protect() is retried: the table must not stay unprotected.
            if kind == "protect" and e.sqlstate in ("55P03", "57014", "40P01", "40001") and attempt < 5:
                self.ddl(conn, kind, t, arg, attempt + 1)

    def side_transaction(self, conn):
        """A transaction on prop.report or prop.maint (side_check())."""
        r = self.rng
        t = r.choice(["report", "maint"])
        maintenance = t == "maint" and r.random() < 0.5
        role = r.choice([None, "fencing_property_maint", "fencing_property_rls"])
        conn.execute("BEGIN")
        try:
            if role:
                conn.execute(f"SET LOCAL ROLE {role}")
            txn_token = None
            if maintenance:
                conn.execute("SET LOCAL fencing.maintenance = on")
            elif r.random() < 0.5:
                txn_token = self.gen.token()
                conn.execute(f"SET LOCAL fencing.token = {txn_token}")
            for _ in range(r.randint(1, 3)):
                k = self.gen.key()
                # Maintenance transactions present no token: they are maintenance writes.
                tok = None if maintenance or r.random() < 0.4 else self.gen.token()
                settok = f", last_fencing_token = {tok}" if tok is not None else ""
                x = r.randrange(4)
                if x == 0:
                    sql = f"UPDATE prop.{t} SET v = v + 1{settok} WHERE k = {k}"
                elif x == 1:
                    sql = f"DELETE FROM prop.{t} WHERE k = {k}"
                elif x == 2:
                    cols = "(k, v, last_fencing_token)" if tok is not None else "(k, v)"
                    vals = f"({k}, 0, {tok})" if tok is not None else f"({k}, 0)"
                    sql = f"INSERT INTO prop.{t} {cols} VALUES {vals}"
                else:
                    cols = "(k, v, last_fencing_token)" if tok is not None else "(k, v)"
                    vals = f"({k}, 0, {tok})" if tok is not None else f"({k}, 0)"
                    sql = (f"INSERT INTO prop.{t} {cols} VALUES {vals} "
                           f"ON CONFLICT (k) DO UPDATE SET v = prop.{t}.v + 1")
                st = Statement(sql, "side", t, ())
                st.txn_token = txn_token
                st.maintenance = maintenance
                st.role = role
                sid = self.next_sid()
                self.side_log[sid] = st
                conn.execute("SAVEPOINT s")
                conn.execute("SELECT set_config('prop.stmt', %s, true)", (sid,))
                try:
                    cur = conn.execute(sql)
                    st.outcome = "ok"
                    st.rows = cur.rowcount
                    conn.execute("RELEASE SAVEPOINT s")
                except psycopg.Error as e:
                    st.outcome = e.sqlstate or "?"
                    if e.sqlstate not in EXPECTED:
                        self.failures.append(f"unexpected {e.sqlstate}: {e}\n    in: {sql}")
                    conn.execute("ROLLBACK TO SAVEPOINT s")
            conn.execute("COMMIT" if r.random() < 0.85 else "ROLLBACK")
        except psycopg.Error as e:
            self.failures.append(f"side transaction: {e.sqlstate} {e}")
            if not conn.closed:
                conn.execute("ROLLBACK")
        finally:
            with self.clock.lock:
                self.live.clear()

    def transaction(self, conn):
        r = self.rng
        level = " ISOLATION LEVEL REPEATABLE READ" if r.random() < 0.1 else ""
        conn.execute("BEGIN" + level)
        txn_token = None
        refused = []
        detaches = []  # the log's sequence after each DETACH/ATTACH of this transaction
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
                sid = self.next_sid()
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
                    elif st.kind == "ddl":
                        # It holds the table's lock: every write of the table before it is
                        # logged at or below this, every one after it above.
                        detaches.append(self.high_seq(conn))
                except psycopg.Error as e:
                    st.outcome = e.sqlstate or "?"
                    st.detail = e.diag.message_detail
                    st.own_detaches = list(detaches)
                    with self.clock.lock:
                        st.own = max(self.live, default=0)
                    refused.append(st)
                    if e.sqlstate not in EXPECTED and (st.kind, e.sqlstate) not in DDL_WRITE_EXPECTED:
                        self.failures.append(f"unexpected {e.sqlstate}: {e}\n    in: {st.sql}")
                    if not savepoint:
                        raise
                    conn.execute("ROLLBACK TO SAVEPOINT s")
            conn.execute("COMMIT" if r.random() < 0.85 else "ROLLBACK")
        except psycopg.Error:
            if not conn.closed:
                conn.execute("ROLLBACK")
        finally:
            with self.clock.lock:
                self.live.clear()
            if refused and not conn.closed:
                hi = self.high_seq(conn)
                for st in refused:
                    st.hi = hi


def bar_rule(mode, token, bar):
    return token > bar if mode == "strict" else token >= bar


# fenced_update() names the key by the caller's own JSON argument when the
# caller may not read the key columns (row-level security).
DETAIL_STALE = re.compile(r"Relation (?P<rel>\S+), (?:key \((?P<cols>.*?)\)=\((?P<vals>.*?)\)|key (?P<json>\{.*?\})|all rows|key \(not visible\)): "
                          r"presented token (?P<presented>\d+), stored token (?P<stored>\d+|\(not visible\)) "
                          r"\((?P<mode>\w+) mode\)")


def check(audit, log, final, stats):
    """Replays the accepted writes and the DDL against the model; returns violations."""
    violations = []
    rows = {}  # (table, k, zone) -> the token the row stores
    marks = {}  # (table, k, zone) -> highest token of a deletion while protected (never reset)
    seen = {}  # (table, k, zone) -> highest token the key ever had (rows and marks)
    floors = {}  # (table, zone or None) -> floor for new keys (TRUNCATE, DETACH)
    compacted = {}  # table -> compact() floor, for every write
    protected = {t: True for t in TABLES}
    modes = dict(TABLES)
    highest_mark = {}  # table -> highest mark
    allowed = {}  # table -> refusals of tokens at or below it are allowed (key identity changed)
    trail = []  # (seq, table, key or None, what happened): the schedule printed with a violation
    shown = [0]

    def new_key_bar(key):
        t, _, zone = key
        return max(marks.get(key, 0), floors.get((t, None), 0),
                   floors.get((t, zone), 0) if zone is not None else 0, compacted.get(t, 0))

    def history(t, key):
        lines = [f"      {seq:>7} {what}" for seq, tt, kk, what in trail if tt == t and (kk is None or kk == key)]
        return "\n    schedule (log seq, statement, what):\n" + "\n".join(lines[-14:]) if lines else ""

    def fail(row, message, key=None):
        st = log.get(row["stmt"])
        text = (f"{message}\n    audit: {row}\n    statement: {st.sql if st else '?'}"
                f" (fencing.token {st.txn_token if st else '?'})")
        if shown[0] < 5:
            shown[0] += 1
            text += history(row["rel"], key)
        violations.append(text)

    def mark(key, token):
        marks[key] = max(marks.get(key, 0), token)
        highest_mark[key[0]] = max(highest_mark.get(key[0], 0), token)
        seen[key] = max(seen.get(key, 0), token)

    def store(key, token):
        rows[key] = token
        seen[key] = max(seen.get(key, 0), token)

    move_tokens = {}
    for row in audit:
        if row["op"] == "INSERT":
            move_tokens[(row["stmt"], row["new_k"])] = row["new_token"]

    # Refusals, checked once every write logged before them is replayed.
    refusals = sorted((st for st in log.values() if st.outcome in ("23T01", "23T02") and st.hi is not None),
                      key=lambda st: st.hi)
    pending = collections.deque(refusals)
    # A DETACH/ATTACH in a write transaction, then a refusal in it: the floor that
    # DETACH left the table applies to the refusal, whether or not the transaction
    # (and with it the DETACH's note) was committed.  Worked out at the DETACH's place.
    own_detaches = collections.deque(sorted(((seq, st) for st in refusals for seq in st.own_detaches),
                                            key=lambda pair: pair[0]))
    own_floor = {}  # statement -> the highest floor its transaction's own DETACHes left

    def detach_floor(t, zone):
        """The floor a DETACH of the partition of `zone` leaves the table (see the DETACH event)."""
        taken = [tok for key, tok in rows.items() if key[0] == t and key[2] == zone]
        return max(taken + [floors.get((t, zone), 0), floors.get((t, None), 0), compacted.get(t, 0)])

    def explain(st):
        if st.outcome == "23T02":
            if st.txn_token is not None:
                violations.append(f"missing token refused in a transaction that set fencing.token "
                                  f"{st.txn_token}: {st.sql}\n    DETAIL: {st.detail}")
            else:
                stats["refusals predicted"] += 1
            return
        m = DETAIL_STALE.search(st.detail or "")
        if m is None:
            violations.append(f"a stale refusal without the facts in its DETAIL: {st.detail}\n    in: {st.sql}")
            return
        rel = m["rel"].split(".")[-1].strip('"')
        t = "parted" if rel.startswith("parted") else rel
        presented = int(m["presented"])
        if m["stored"].startswith("("):
            stats["refusals predicted"] += 1  # row-level security hides the row
            return
        stored = int(m["stored"])
        if not (presented < stored or (m["mode"] == "strict" and presented == stored)):
            violations.append(f"a refusal of token {presented} over {stored} in {m['mode']} mode: {st.sql}")
            return
        key = None
        if m["json"] is not None:
            values = {c: str(v) for c, v in json.loads(m["json"]).items()}
            k = int(decimal.Decimal(values["k"]))
            zone = int(values["zone"]) if t == "parted" else None
            key = (t, k, zone)
        elif m["cols"] is not None:
            values = dict(zip([c.strip() for c in m["cols"].split(",")], [v.strip() for v in m["vals"].split(",")]))
            k = int(decimal.Decimal(values["k"]))
            zone = int(values["zone"]) if t == "parted" else None
            key = (t, k, zone)
        if key is not None:
            known = max(seen.get(key, 0), floors.get((t, key[2]), 0) if key[2] is not None else 0)
        else:
            known = max([tok for kk, tok in seen.items() if kk[0] == t] + [0])
            known = max([known] + [tok for (tt, _), tok in floors.items() if tt == t])
        known = max(known, floors.get((t, None), 0), compacted.get(t, 0), st.own)
        if stored <= known:
            stats["refusals predicted"] += 1
        elif stored <= own_floor.get(id(st), 0):
            stats["refusals predicted"] += 1
            stats["refusals by its own DETACH"] += 1
        elif presented <= allowed.get(t, 0):
            stats["refusals DDL-conservative"] += 1
        else:
            violations.append(f"a refusal the model cannot explain: token {presented} refused over {stored}, "
                              f"the model knows at most {known} for {key or t} and allows DDL refusals up to "
                              f"{allowed.get(t, 0)}\n    statement: {st.sql} (fencing.token {st.txn_token})"
                              f"\n    DETAIL: {st.detail}" + history(t, key))

    def own_detach(st):
        if protected["parted"]:
            own_floor[id(st)] = max(own_floor.get(id(st), 0), detach_floor("parted", 2))

    for row in audit:
        while own_detaches and own_detaches[0][0] < row["seq"]:
            own_detach(own_detaches.popleft()[1])
        while pending and pending[0].hi < row["seq"]:
            explain(pending.popleft())
        st = log.get(row["stmt"])
        t = row["rel"]
        op = row["op"]
        seq = row["seq"]
        if op in EVENTS:
            stats[f"DDL {op.lower()}"] += 1
            if op == "PROTECT":
                protected[t] = True
                modes[t] = row["info"]
                allowed[t] = max(allowed.get(t, 0), highest_mark.get(t, 0))
            elif op == "UNPROTECT":
                protected[t] = False
            elif op in ("PKEY", "TYPE"):
                allowed[t] = max(allowed.get(t, 0), highest_mark.get(t, 0))
            elif op == "COMPACT":
                compacted[t] = max(compacted.get(t, 0), row["new_token"])
            elif op == "DETACH" and protected[t]:
                floors[(t, None)] = max(floors.get((t, None), 0), detach_floor(t, int(row["info"])))
            info = f" {row['info']}" if row["info"] else ""
            token = f" {row['new_token']}" if row["new_token"] else ""
            trail.append((seq, t, None, f"{row['stmt']:>8} {op}{info}{token}"
                                        f"{'' if protected[t] else ' (unprotected)'}"))
            continue
        if st is None:
            fail(row, "a write no statement of the test made")
            continue
        mode = modes[t]
        guarded = protected[t]
        floor = compacted.get(t, 0)
        stats["writes while protected" if guarded else "writes while unprotected"] += 1
        if guarded and st.mixed_merge:
            fail(row, "a MERGE with mixed token assignments was accepted")
        if op == "TRUNCATE":
            zone = row["old_zone"]
            trail.append((seq, t, None, f"{row['stmt']:>8} TRUNCATE {'all' if zone is None else zone} "
                                        f"under {st.txn_token}{'' if guarded else ' (unprotected)'}"))
            if not guarded:
                for key in [key for key in rows if key[0] == t and (zone is None or key[2] == zone)]:
                    del rows[key]
                continue
            if st.txn_token is None:
                fail(row, "TRUNCATE accepted without a token")
                continue
            if floor and not bar_rule(mode, st.txn_token, floor):
                fail(row, f"TRUNCATE under {st.txn_token} below the compact() floor {floor}")
            for key in [key for key in rows if key[0] == t and (zone is None or key[2] == zone)]:
                if not bar_rule(mode, st.txn_token, rows[key]):
                    fail(row, f"TRUNCATE under {st.txn_token} over row {key} holding {rows[key]}", key)
                del rows[key]
            floors[(t, zone)] = max(floors.get((t, zone), 0), st.txn_token)
            continue
        if op == "DELETE":
            key = (t, row["old_k"], row["old_zone"])
            if st.kind == "move":
                presented = move_tokens.get((row["stmt"], row["old_k"]))
            else:
                presented = st.txn_token
            trail.append((seq, t, key, f"{row['stmt']:>8} DELETE {key[1:]} under {presented}"
                                       f"{'' if guarded else ' (unprotected)'}"))
            if guarded:
                if presented is None:
                    fail(row, "DELETE accepted without a token", key)
                    rows.pop(key, None)
                    continue
                if not bar_rule(mode, presented, max(rows.get(key, 0), floor)):
                    fail(row, f"stale DELETE: {presented} after {max(rows.get(key, 0), floor)}", key)
                mark(key, presented)
            rows.pop(key, None)
            continue
        presented = row["new_token"]
        new_key = (t, row["new_k"], row["new_zone"])
        old_key = (t, row["old_k"], row["old_zone"]) if op == "UPDATE" else None
        trail.append((seq, t, new_key, f"{row['stmt']:>8} {op} {old_key[1:] if old_key else ''}"
                                       f"{'->' if old_key and old_key != new_key else ''}{new_key[1:]} "
                                       f"at {presented}{'' if guarded else ' (unprotected)'}"))
        if old_key and old_key != new_key:
            trail.append((seq, t, old_key, trail[-1][3]))
        if not guarded:
            if old_key:
                rows.pop(old_key, None)
            store(new_key, presented)
            continue
        lent = op == "UPDATE" and st.lends_to_key is not None and row["old_k"] == st.lends_to_key
        if op not in st.explicit and not lent:
            if st.txn_token is None:
                fail(row, f"{op} accepted without a token", new_key)
            elif presented != st.txn_token:
                fail(row, f"{op} wrote {presented}, the transaction presented {st.txn_token}", new_key)
        if (op == "UPDATE" and st.txn_token is not None and st.kind != "fenced"
                and presented != st.txn_token):
            # An assigned token beside fencing.token is the row's own (a
            # write-back: fencing.token applies), fencing.token, or refused.
            fail(row, f"UPDATE under fencing.token {st.txn_token} wrote {presented}", new_key)
        if op == "UPDATE":
            stored = rows.get(old_key, 0)
            if not bar_rule(mode, presented, max(stored, floor)):
                fail(row, f"stale UPDATE: {presented} after {max(stored, floor)}"
                          f"{' (the stored token decreased)' if presented < stored else ''}", old_key)
            if old_key != new_key:
                rows.pop(old_key, None)
                mark(old_key, presented)
                if not bar_rule(mode, presented, new_key_bar(new_key)):
                    fail(row, f"key change to a key that must follow {new_key_bar(new_key)}: {presented}", new_key)
        else:
            if not bar_rule(mode, presented, new_key_bar(new_key)):
                fail(row, f"stale INSERT: {presented} after {new_key_bar(new_key)}", new_key)
        store(new_key, presented)
    while own_detaches:
        own_detach(own_detaches.popleft()[1])
    while pending:
        explain(pending.popleft())
    # The tables hold exactly the rows the log says, each with its key's last token.
    if set(rows) != set(final):
        violations.append(f"rows differ from the log: only in the log {sorted(set(rows) - set(final))[:5]}, "
                          f"only in the tables {sorted(set(final) - set(rows))[:5]}")
    for key, token in final.items():
        if key in rows and token != rows[key]:
            violations.append(f"row {key} holds token {token}, its last accepted write was {rows[key]}")
    return violations


def side_check(side_audit, side_log, stats):
    """Replays prop.side_audit (report-only and maintenance writes); returns violations."""
    violations = []
    marks = {}  # (table, k) -> its mark: the highest token a DELETE of it left (stored or presented)
    trail = collections.defaultdict(list)  # (table, k) -> its audit rows so far
    for row in side_audit:
        if row["old_k"] is not None:
            trail[(row["rel"], row["old_k"])].append(row)
        if row["new_k"] is not None and row["new_k"] != row["old_k"]:
            trail[(row["rel"], row["new_k"])].append(row)
        key_old = (row["rel"], row["old_k"])
        key_new = (row["rel"], row["new_k"])
        st = side_log.get(row["stmt"])
        key = key_old if row["old_k"] is not None else key_new
        where = (f"\n    audit: {row}\n    statement: {st.sql if st else '?'}"
                 f" (fencing.token {st.txn_token if st else '?'}, role {st.role if st else '?'})"
                 "\n    its key's last writes:\n"
                 + "\n".join(f"      {r['seq']} {r['op']} {r['old_token']} -> {r['new_token']} stmt {r['stmt']}: "
                             f"{side_log[r['stmt']].sql if r['stmt'] in side_log else '?'} "
                             f"(fencing.token {r['txn_token']}, maintenance {r['maintenance']})"
                             for r in trail[key][-6:]))
        maintenance = row["maintenance"] == "on"
        if maintenance and row["role"] == "fencing_property_rls":
            violations.append("maintenance write accepted from a role that is neither owner nor maintainer" + where)
        if row["op"] == "UPDATE":
            stats["side updates"] += 1
            if row["new_token"] < row["old_token"]:
                violations.append(f"the stored token went down: {row['old_token']} to {row['new_token']}" + where)
            elif maintenance and row["new_token"] != row["old_token"]:
                violations.append(f"a maintenance UPDATE moved the token: {row['old_token']} to {row['new_token']}"
                                  + where)
        elif row["op"] == "DELETE":
            stats["side deletes"] += 1
            # A DELETE presents fencing.token: the mark is the higher of it and the
            # stored token (report-only and maintenance keep the stored one).
            presented = int(row["txn_token"]) if row["txn_token"] else 0
            marks[key_old] = max(marks.get(key_old, 0), row["old_token"], presented)
        else:
            stats["side inserts"] += 1
            mark = marks.get(key_new, 0)
            if row["new_token"] < mark:
                violations.append(f"an INSERT below its key's last deletion: {row['new_token']} after {mark}" + where)
            elif maintenance and row["new_token"] != mark:
                violations.append(f"a maintenance INSERT did not take its key's mark {mark}: {row['new_token']}"
                                  + where)
        if maintenance:
            stats["side maintenance writes"] += 1
        elif row["rel"] == "report":
            stats["side report-only writes"] += 1
    for st in side_log.values():
        if not getattr(st, "maintenance", False) or st.outcome is None:
            continue
        stats[f"side maintenance by {st.role or 'owner'}: {st.outcome}"] += 1
        if st.role == "fencing_property_rls" and st.outcome == "ok" and getattr(st, "rows", 0) > 0:
            violations.append(f"a maintenance write by a non-maintainer succeeded: {st.sql}")
        if st.role != "fencing_property_rls" and st.outcome == "42501":
            violations.append(f"a maintenance write by {st.role or 'the owner'} was refused: {st.sql}")
    return violations


def collect_side(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT * FROM prop.side_audit ORDER BY seq")
        names = [d.name for d in cur.description]
        return [dict(zip(names, r)) for r in cur.fetchall()]


def collect(dsn):
    """The log of accepted writes and DDL, and the rows the tables hold: check()'s input."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute("SELECT * FROM prop.audit ORDER BY seq")
        names = [d.name for d in cur.description]
        audit = [dict(zip(names, r)) for r in cur.fetchall()]
        final = {}
        for t in TABLES:
            zone = "zone" if t == "parted" else "NULL::int"
            for k, z, tok in conn.execute(f"SELECT k, {zone}, last_fencing_token FROM prop.{t}"):
                final[(t, int(k), z)] = tok  # k may be numeric after a type change
    return audit, final


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--sessions", type=int, default=4)
    parser.add_argument("--transactions", type=int, default=None,
                        help="per session, instead of --seconds (for replays)")
    parser.add_argument("--ddl-weight", type=float, default=0.03,
                        help="probability that a transaction is DDL (0: writes only)")
    parser.add_argument("--side-weight", type=float, default=0.15,
                        help="probability that a transaction is on prop.report or prop.maint (0: none)")
    parser.add_argument("--dsn", default="")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    print(f"property: seed {seed}, {args.sessions} sessions, {args.seconds:g} s, DDL weight {args.ddl_weight:g} "
          f"(replay: --seed {seed} --sessions 1 --ddl-weight {args.ddl_weight:g})", flush=True)

    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute(SETUP)

    clock = Clock()
    log = {}
    side_log = {}
    stop = threading.Event()
    deadline = time.monotonic() + args.seconds
    sessions = [Session(i, args.dsn, seed, deadline, clock, log, stop, args.transactions, args.ddl_weight,
                        args.side_weight, side_log)
                for i in range(args.sessions)]
    if args.sessions == 1:
        sessions[0].run()
    else:
        for s in sessions:
            s.start()
        for s in sessions:
            s.join()

    failures = [f for s in sessions for f in s.failures]
    audit, final = collect(args.dsn)
    stats = collections.Counter()
    violations = check(audit, log, final, stats)
    side_audit = collect_side(args.dsn)
    violations += side_check(side_audit, side_log, stats)

    outcomes = {}
    for st in log.values():
        if st.outcome is not None:
            outcomes[st.outcome] = outcomes.get(st.outcome, 0) + 1
    print(f"statements: {sum(outcomes.values())}, accepted rows audited: {len(audit)}, "
          f"transactions per session: {[s.transactions for s in sessions]}")
    for outcome, n in sorted(outcomes.items(), key=lambda x: -x[1]):
        print(f"  {outcome:12} {n:7}  {EXPECTED.get(outcome, '')}")
    ddl = collections.Counter((st.ddl, st.outcome) for st in log.values() if getattr(st, "ddl", None))
    if ddl:
        print("DDL (kind, outcome): " + ", ".join(f"{k} {o} {n}" for (k, o), n in sorted(ddl.items())))
    for name, n in sorted(stats.items()):
        print(f"  {name:28} {n:7}")
    for message in failures + violations:
        print("VIOLATION:", message)
    ok = not failures and not violations and len(audit) > 0 and outcomes.get("23T01", 0) > 0
    if args.side_weight and not side_audit:
        print("VIOLATION: no write on the side tables; the test did not test them")
        ok = False
    if len(audit) == 0 or outcomes.get("23T01", 0) == 0:
        print("VIOLATION: the run accepted or refused nothing; the test did not test")
    if failures or violations:
        # CI shows the tail of the output: the first line of each violation again, and the seed.
        print(f"violations (seed {seed}, {args.sessions} sessions):")
        for message in (failures + violations)[:10]:
            print("  " + message.splitlines()[0][:300])
    print(f"test property_model ... {'ok' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
