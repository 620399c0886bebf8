#!/usr/bin/python3
"""
Input fuzzer for fencing.fenced_update() and fencing.protect() (and the
writes that go through the guard).

The one assertion: every call ends in success or in a clean error whose
SQLSTATE is documented - never a crash (lost connection, server restart),
never XX000, never an undocumented SQLSTATE.  Three cheap oracles ride along
because they cost one query each and catch what the contract forbids
outright: a write to a protected table accepted without any token, a row's
stored token going down (a stale write accepted), and a value stored by
fenced_update() that its column's domain refuses.

Everything is generated from random.Random(seed) and run on a single
connection, so `--seed N` replays the same sequence (`--steps N` stops after N
cases).  The script creates its own database (fencing_fuzz) and two roles,
and drops them at the end.  PG* environment variables select the server.

Usage: fuzz.py [--seconds N] [--seed N] [--steps N] [--verbose]
"""
import argparse
import json
import os
import random
import re
import sys
import time
import traceback

try:
    import psycopg
except ImportError:  # reported by main(), after the seed line
    psycopg = None

DB = "fencing_fuzz"
# A table in pg_temp named like a type would shadow that type in casts.
TYPE_NAMES = {"oid", "text", "int2", "int4", "int8", "bigint", "integer", "numeric", "name", "bool", "date",
              "jsonb", "json", "uuid", "regclass", "money", "inet", "time", "timestamp", "interval", "bytea",
              "key", "char", "varchar", "bit", "varbit", "pg_lsn", "cidr", "macaddr", "float4", "float8", "timetz",
              "timestamptz", "citext"}
READER = "fencing_fuzz_reader"
WRITER = "fencing_fuzz_writer"
MAX_TABLES = 14
INT64_MAX = 9223372036854775807
INT64_MIN = -9223372036854775808

# ---------------------------------------------------------------------------
# What counts as a clean error.
# ---------------------------------------------------------------------------

# SQLSTATEs the contract documents (docs/sql-api.md, "Error codes"
# and "as PostgreSQL raises them"); all of classes 22 and 23 are accepted too.
DOCUMENTED = {
    "23T01", "23T02", "22004", "22023", "22P02", "22003", "22007", "22008",
    "22001", "22021", "22P05", "23502", "23505", "23514", "23503",
    "42P01", "42809", "42703", "42804", "42501", "0A000", "55000", "P0002",
    "42710", "40001", "40P01", "25P02", "42P07", "42P16",
}
# Beyond that list, each justified by docs/sql-api.md ("other errors use the
# standard SQLSTATE") and docs/sql-api.md ("it is the statement UPDATE t SET ...",
# "a value that does not convert fails with the type's own SQLSTATE"):
#  428C9 generated_always: changes/DML naming a generated or identity column,
#        exactly what the equivalent plain UPDATE raises;
#  42611 invalid_column_definition: protect() on a generated token column
#        (docs/sql-api.md: the column must not be generated);
#  42701 duplicate_column: protect() asked to add a token column whose name
#        is taken by a system column (ctid, xmin ...) or a dropped column;
#  DML of our own: 54000 (index row too large for a long key), 42P10 and
#        21000 (ON CONFLICT on a table without a matching key / touching a
#        row twice), and the input errors of regclass values;
#  42701 duplicate_column from PostgreSQL's parser (checkInsertTargets), for
#        INSERT INTO t (id, ..., id): the INSERT names the key columns and now
#        and then the first generated or identity column as well, which is the
#        key itself once ALTER TABLE ... ADD PRIMARY KEY picked it; raised at
#        parse analysis, before any hook or trigger, with or without protect()
#        (UPDATE/ON CONFLICT SET a = .., a = .. gives 42601 instead);
# and, per case: 39P01 where a guard trigger was made by hand with bad
# arguments or timing (and for calling fencing.guard() directly: PostgreSQL's
# code for a trigger protocol violation); 54000/54001 for JSON nested past
# PostgreSQL's limits; 3F000/42602 from the regclass input of our own target
# literal; a conversion error of fenced_update() must carry exactly the
# SQLSTATE the column type's input function gives (checked with COPY).
EXTRA = {
    "fenced_update": {"428C9"},
    "protect": {"42611", "42701"},
    "dml": {"428C9", "54000", "42P10", "21000", "42602", "3F000", "42601", "42704", "42701"},
    "set": set(),
    "helper": set(),
}
# fz.reentrant's own trigger: it updates other rows of the same table (27000
# when the outer statement reaches them), and its arithmetic on NEW.id fails
# (42883) once the fuzzer has renamed or retyped that column.
FIXED_EXTRA = {"27000", "42883"}
# Errors a type's input function raises for a value that does not convert
# (regclass: 42P01, 3F000, 42602, 42601 ...; arrays: 54000 past 6 dimensions).
INPUT_CODES = {"42P01", "3F000", "42602", "42601", "42704", "0A000", "54000"}
# For DDL of our own making anything but these is fine (we make odd tables).
DDL_FATAL_CLASSES = ("XX", "58", "39", "P0", "2F", "38", "53", "57", "08")


def class_ok(code):
    return code[:2] in ("22", "23")


# ---------------------------------------------------------------------------
# JSON and SQL text.
# ---------------------------------------------------------------------------

class Num(str):
    """A JSON number, emitted verbatim (also a valid text form)."""


class Raw(str):
    """Verbatim JSON text, possibly invalid."""


class Pairs(list):
    """A JSON object with possibly repeated keys: [(key, value), ...]."""


def N(x):
    return Num(str(x))


def to_json(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (Num, Raw)):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, Pairs):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + to_json(x) for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(to_json(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + to_json(x)
                               for k, x in v.items()) + "}"
    raise TypeError(repr(v))


def qi(name):
    return '"' + name.replace('"', '""') + '"'


def ql(s):
    return "'" + s.replace("'", "''") + "'"


def fit63(name):
    """Cut an identifier to 63 bytes at a character boundary."""
    b = name.encode()
    if len(b) <= 63:
        return name
    b = b[:63]
    while True:
        try:
            return b.decode()
        except UnicodeDecodeError:
            b = b[:-1]


def array_literal(v):
    """A JSON array as fenced_update() turns it into a PostgreSQL array literal."""
    out = []
    for x in v:
        if x is None:
            out.append("NULL")
        elif isinstance(x, list) and not isinstance(x, Pairs):
            out.append(array_literal(x))
        else:
            s = plain_text(x)
            out.append('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(out) + "}"


def plain_text(x):
    if x is True:
        return "true"
    if x is False:
        return "false"
    if isinstance(x, (list, dict)):
        return to_json(x)
    return str(x)


# ---------------------------------------------------------------------------
# Random building blocks.
# ---------------------------------------------------------------------------

PIECES = ["a", "b", "Z", "é", "ß", "漢字", "🙂", " ", "'", '"', "\\", "%", "_", ",", "{", "}",
          "(", ")", "NULL", "skip", "!", "\t", "\n", "\u00a0", "\u0301", "\ufeff", "$1", "--",
          "/*", ";", "x" * 40, "\\u0000", "\u2028", "\x7f", "\x01"]


def rtext(r, maxpieces=6):
    c = r.random()
    if c < 0.4:
        return r.choice(["a", "b", "c", "A", "", " ", "a ", "order:101", "order:7", "skip"])
    if c < 0.97:
        return "".join(r.choice(PIECES) for _ in range(r.randint(0, maxpieces)))
    return r.choice(["x", "é", "🙂", "ab"]) * r.randint(900, 3000)


IDENT_POOL = ["With Space", 'quo"te', "apo'strophe", "back\\slash", "ÜnÏcödé", "列名", "UPPER",
              "MiXeD", "select", "user", "order", "table", "group", "from", "where", "primary",
              "key", "default", "null", "true", "$dollar", "1digit", "dot.ted", "semi;colon",
              "percent%s", "--dash", "/*c*/", "tab\there", "new\nline", "🙂", " lead", "trail ",
              "x" * 63, "é" * 31 + "x", "🙂" * 15 + "abc", "last_fencing_token_", "Last_Fencing_Token",
              "ctid_", "oid", "xmin_", "k", "id", "v", "epoch"]


def ident(r, taken):
    for _ in range(50):
        c = r.random()
        if c < 0.45:
            name = r.choice("abcdefgkmnpqrstuvwxyz") + str(r.randint(0, 99))
        else:
            name = r.choice(IDENT_POOL)
            if r.random() < 0.3:
                name = fit63(name + str(r.randint(0, 9)))
        name = fit63(name)
        if name not in taken:
            taken.append(name)
            return name
    name = "c%d" % len(taken)
    taken.append(name)
    return name


def rjson(r, depth=0):
    c = r.random()
    if depth > 3 or c < 0.55:
        return r.choice([None, True, False, N(r.randint(-5, 5)), Num("1e400"), Num("-0"),
                         Num("0.1"), Num("1E-7"), Num("123456789012345678901234567890"),
                         rtext(r, 4), "", "skip"])
    if c < 0.78:
        return [rjson(r, depth + 1) for _ in range(r.randint(0, 3))]
    return {rtext(r, 2): rjson(r, depth + 1) for _ in range(r.randint(0, 3))}


def deep(r):
    n = r.choice([7, 50, 1000, 5000])
    return Raw("[" * n + "1" + "]" * n) if r.random() < 0.6 else Raw('{"a":' * n + "1" + "}" * n)


# ---------------------------------------------------------------------------
# Types.
# ---------------------------------------------------------------------------

class Type:
    def __init__(self, ddl, cast=None, key=True, gen=None, bad=None, weight=1, json_col=False,
                 array=False, domain=None, part=False):
        self.ddl = ddl
        self.cast = cast or ddl
        self.key = key
        self._gen = gen
        self._bad = bad or (lambda r: rtext(r))
        self.weight = weight
        self.json_col = json_col
        self.array = array
        self.domain = domain  # base type of a domain with constraints we may re-check
        self.part = part      # usable as a partition key

    def gen(self, r):
        return self._gen(r)

    def bad(self, r):
        return self._bad(r)


def ch(*values):
    vals = list(values)
    return lambda r: r.choice(vals)


def ints(lo, hi):
    def gen(r):
        x = r.choice([r.randint(-3, 12)] * 6 + [lo, hi, 0, r.randint(lo, hi)])
        return N(x) if r.random() < 0.6 else str(x)

    def bad(r):
        return r.choice([N(hi + 1), str(lo - 1), "abc", "", "1.5", Num("1.5"), "1e3", Num("1e30"),
                         " ", "0x1F", True, [N(1)], {"a": N(1)}, "١٢", str(hi) + "0"])
    return gen, bad


def uuid_gen(r):
    pool = ["00000000-0000-0000-0000-000000000000", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11"]
    if r.random() < 0.6:
        return r.choice(pool)
    h = "%032x" % r.getrandbits(128)
    return "%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:])


def build_types(has_citext, has_icu):
    T = []
    g, b = ints(-32768, 32767)
    T.append(Type("int2", gen=g, bad=b, weight=3, part=True))
    g, b = ints(-2 ** 31, 2 ** 31 - 1)
    T.append(Type("int4", gen=g, bad=b, weight=8, part=True))
    g, b = ints(INT64_MIN, INT64_MAX)
    T.append(Type("int8", gen=g, bad=b, weight=4, part=True))
    T.append(Type("numeric(12,3)", cast="numeric", weight=3,
                  gen=lambda r: r.choice(["1", "1.0", "1.000", "-0", "0", "2.5", "NaN", Num("1.00"),
                                          Num("-0.0"), Num("1e2"), Num("0.0005"),
                                          "%d.%03d" % (r.randint(-999, 999), r.randint(0, 999))]),
                  bad=ch("1e10", "Infinity", "abc", Num("1e400"), "1..2", "", {"n": N(1)})))
    T.append(Type("numeric", weight=2,
                  gen=ch("0", "1.0", "1.00", "-0", "NaN", "Infinity", "-Infinity",
                         Num("123456789012345678901234567890.123"), Num("1e-20"), Num("1E+5"), "100000"),
                  bad=ch("1e200000", "--1", "abc", "NaNx", "", Raw("1e1000000"))))
    T.append(Type("float4", weight=2,
                  gen=ch("0", "-0", "1.5", "NaN", "Infinity", "-Infinity", "1e-45", "3.4028235e38",
                         Num("1.25"), Num("-0.0"), Num("0.1")),
                  bad=ch("1e39", "abc", "1e-50", "1.5.5", "")))
    T.append(Type("float8", weight=2,
                  gen=ch("0", "-0", "1.5", "NaN", "Infinity", "5e-324", Num("1.25"), Num("-0.0"), Num("0.1"),
                         Num("1e308")),
                  bad=ch("1e309", "1e-400", "x", Num("1e400"))))
    T.append(Type("text", weight=8, part=True, gen=lambda r: rtext(r),
                  bad=lambda r: r.choice([Raw('"a\\u0000b"'), Raw('"\\ud800"'), [N(1)], {"a": "b"}])))
    T.append(Type("varchar(8)", cast="varchar", weight=3,
                  gen=ch("a", "b", "abc", "é漢🙂", "a b", "12345678", "sp   ", "1234567   "),
                  bad=ch("123456789", "x" * 100, "é" * 9)))
    T.append(Type("char(4)", cast="bpchar", weight=2, gen=ch("a", "ab  ", "abcd", "é", "a", "ab"),
                  bad=ch("abcde", "é漢🙂xy")))
    T.append(Type('"char"', weight=1, gen=ch("a", "b", "Z", "é", "\\", "!", "\\101")))
    T.append(Type("name", weight=1, gen=ch("a", "b", "With Space", "x" * 100, "é" * 40)))
    T.append(Type("bytea", weight=2, gen=ch("\\x", "\\x00", "\\xdeadbeef", "abc", "a\\\\b", "\\001", "\\xDEADBEEF"),
                  bad=ch("\\xzz", "\\x0", "\\", "\\0", "\\xg")))
    T.append(Type("uuid", weight=3, gen=uuid_gen, bad=ch("not-a-uuid", "", "1234", "a0eebc99-9c0b")))
    T.append(Type("date", weight=3, part=True,
                  gen=ch("2024-01-01", "2024-02-29", "infinity", "-infinity", "epoch", "1999-12-31",
                         "4713-01-01 BC", "Jan 5, 2020", "20200105"),
                  bad=ch("2023-02-29", "2024-13-01", "abc", "5874898-01-01", "", "4714-11-23 BC")))
    T.append(Type("timestamp", weight=2,
                  gen=ch("2024-01-01 00:00:00", "2024-01-01 12:34:56.789012", "infinity", "epoch",
                         "2024-01-01T10:00", "2024-01-01 12:34:56.7890125"),
                  bad=ch("2024-01-01 25:00", "294277-01-01", "x", "2024-01-01 00:00 Mars/Base")))
    T.append(Type("timestamptz", weight=3,
                  gen=ch("2024-01-01 00:00:00+00", "2024-01-01 01:00:00+01", "2024-06-01 12:00 America/New_York",
                         "infinity", "2024-01-01 00:00:00"),
                  bad=ch("2024-01-01 00:00 Mars/Base", "xyz", "2024-01-01 00:00+25")))
    T.append(Type("time", weight=1, gen=ch("00:00", "23:59:59.999999", "24:00:00", "12:00 AM"),
                  bad=ch("24:00:01", "25:00", "ab")))
    T.append(Type("timetz", weight=1, gen=ch("12:00+00", "11:00-01", "12:00:00+05:30"),
                  bad=ch("12:00+99", "x")))
    T.append(Type("interval", weight=2, gen=ch("1 day", "24 hours", "P1D", "1 mon -30 days", "0", "-1 year"),
                  bad=ch("1 fortnight", "P1X", "178000000 years")))
    T.append(Type("bool", weight=2, gen=ch(True, False, "t", "f", "yes", "no", "on", "off", "1", "0", " true "),
                  bad=ch("maybe", "2", "", Num("2"))))
    T.append(Type("inet", weight=2, gen=ch("10.0.0.1", "10.0.0.0/8", "::1", "fe80::1/64", "192.168.1.1/24"),
                  bad=ch("300.0.0.1", "10.0.0.1/33", "x")))
    T.append(Type("cidr", weight=1, gen=ch("10.0.0.0/8", "192.168.0.0/16", "::/0"), bad=ch("10.0.0.1/8", "x")))
    T.append(Type("macaddr", weight=1, gen=ch("08:00:2b:01:02:03", "08-00-2b-01-02-03", "0800.2b01.0203"),
                  bad=ch("08:00:2b:01:02", "zz")))
    T.append(Type("oid", weight=1, gen=ch("0", "1", "4294967295", "-1", N(12345)),
                  bad=ch("4294967296", "-4294967297", "x", Num("1.5"))))
    T.append(Type("regclass", weight=1, gen=ch("pg_class", "pg_catalog.pg_type", "fencing.deleted_keys", "-", "1259"),
                  bad=ch("no_such_relation", "a.b.c.d", "nosuchschema.t", '"unterminated', "")))
    T.append(Type("fz.mood", weight=2, gen=ch("sad", "ok", "happy", 'wéird "q"'), bad=ch("angry", "SAD", "")))
    T.append(Type("jsonb", weight=2, json_col=True, gen=lambda r: rjson(r), bad=lambda r: deep(r)))
    T.append(Type("json", key=False, weight=1, json_col=True, gen=lambda r: rjson(r), bad=lambda r: deep(r)))
    T.append(Type("money", weight=1, gen=ch("1.00", "$12.34", "-5", "0", Num("7.5"), "1,000.00"),
                  bad=ch("abc", "1e30", "92233720368547758.08")))
    T.append(Type("int4[]", weight=2, array=True,
                  gen=ch("{}", "{1,2,3}", "{{1,2},{3,4}}", [N(1), N(2)], [N(1), None], "[0:1]={1,2}", [[N(1)], [N(2)]]),
                  bad=lambda r: r.choice(["{1,a}", "{{1},{2,3}}", [N(1), [N(2)]], "1,2", [[[[[[[N(1)]]]]]]],
                                          ["x"], deep(r)])))
    T.append(Type("text[]", weight=1, array=True,
                  gen=ch("{}", "{a,b}", ["a", 'q"uote', "back\\slash", None], '{"a b",NULL}', ["NULL", "null"]),
                  bad=ch("{a", '{"a}', [[], ["x"]])))
    T.append(Type("fz.pair", weight=1, gen=ch("(1,abc)", "(,)", '(2,"x y")', "(3,)", {"a": N(1), "b": "x"}),
                  bad=ch("(1,2,3)", "(x,y)", "abc")))
    T.append(Type("int4range", weight=1, gen=ch("[1,5)", "(1,5]", "empty", "[,)", "[3,3]"),
                  bad=ch("[5,1)", "[a,b)", "(1")))
    T.append(Type("numrange", weight=1, gen=ch("[1.0,2)", "[1.00,2)", "empty"), bad=ch("[2,1)")))
    T.append(Type("tstzrange", weight=1, gen=ch("[2024-01-01,2024-02-01)", "empty"), bad=ch("[x,y)")))
    T.append(Type("fz.dpos", weight=2, domain="int4", gen=ch(N(1), N(5), "3", N(2147483647)),
                  bad=ch(N(0), N(-3), "x", Num("1e10"), None)))
    T.append(Type("fz.dshort", weight=1, domain="text", gen=ch("a", "abcde", "é漢"), bad=ch("abcdef", None)))
    T.append(Type("fz.dnn", key=False, weight=2, domain="text", gen=ch("x", "y", "skip"), bad=ch(None)))
    T.append(Type("fz.dnest", weight=1, gen=ch(N(1), N(2), N(-4), "5"), bad=ch("x", None)))
    T.append(Type("bit(4)", cast="bit", weight=1, gen=ch("1010", "0000", "1111"), bad=ch("101", "10102")))
    T.append(Type("varbit", weight=1, gen=ch("", "1", "10101"), bad=ch("12")))
    T.append(Type("pg_lsn", weight=1, gen=ch("0/0", "16/B374D848", "FFFFFFFF/FFFFFFFF"), bad=ch("x", "1/2/3")))
    if has_citext:
        T.append(Type("public.citext", weight=2, gen=ch("a", "A", "Abc", "abc", "ß", "SS")))
    if has_icu:
        T.append(Type("text COLLATE fz.ci", cast="text", weight=2, gen=ch("a", "A", "ä", "a\u0308", "b")))
    return T


# ---------------------------------------------------------------------------
# Objects under test.
# ---------------------------------------------------------------------------

class Col:
    def __init__(self, name, fmt, typ, generated, identity, notnull):
        self.name, self.fmt, self.typ = name, fmt, typ
        self.generated, self.identity, self.notnull = generated, identity, notnull
        self.default = None

    def zero_default(self):
        """Does an INSERT that leaves this (token) column out store 0 or NULL?"""
        return not self.generated and not self.identity and self.default in (None, "0", "NULL::bigint")


class Rel:
    """A relation we created: table, partition, view, matview, sequence ..."""

    def __init__(self, kind, qname, base=None):
        self.kind = kind          # 'r', 'p', 'v', 'm', 'S', 'i', 'c'
        self.qname = qname        # quoted, schema-qualified (or pg_temp.)
        self.oid = None
        self.base = base          # a view's table, a partition's parent
        self.temp = False
        self.cols = []
        self.dropped = []
        self.key = []             # primary key columns, in index order
        self.pk_immediate = True
        self.token_col = None     # the guard trigger's token column (own or cloned)
        self.own_guard = False    # the guard was installed on this relation itself
        self.mode = None
        self.guarded = False      # has an enabled fencing_guard trigger (own or cloned)
        self.handmade = False     # carries a fencing_guard trigger we made by hand
        self.rules = False
        self.rls = False
        self.ddl = []             # statements that made it
        self.log = []             # statements that succeeded on it since
        self.rows = {}            # key tuple (text forms) -> stored token text (or None)
        self.deleted = []         # key tuples seen, then gone
        self.model = None         # key tuple -> highest token seen, while protected
        self.model_sig = None
        self.high = 0

    def root(self):
        r = self
        while r.base is not None and r.kind in ("r", "p") and r.base.kind in ("r", "p"):
            r = r.base
        return r

    def logbook(self):
        r = self
        while r.base is not None:
            r = r.base
        return r

    def has_handmade(self):
        """A hand-made fencing_guard trigger here or on an ancestor (cloned to partitions)."""
        r = self
        while r is not None:
            if r.handmade:
                return True
            r = r.base if r.base is not None and r.base.is_table() else None
        return False

    def col(self, name):
        for c in self.cols:
            if c.name == name:
                return c
        return None

    def is_table(self):
        return self.kind in ("r", "p")


class Case:
    def __init__(self, kind, stmts, rel=None, role=None):
        self.kind = kind
        self.stmts = stmts
        self.rel = rel
        self.role = role
        self.extra = set()
        self.meta = {}
        self.rels = [rel] if rel is not None else []


# ---------------------------------------------------------------------------
# The fuzzer.
# ---------------------------------------------------------------------------

class Fuzzer:
    def __init__(self, args):
        self.args = args
        self.seed = args.seed
        self.r = random.Random(self.seed)
        self.conn = None
        self.rels = []
        self.dropped_oids = []
        self.failures = []
        self.failure_sigs = {}
        self.counts = {}
        self.kind_counts = {}
        self.step = 0
        self.setup = []           # (sql, tags)
        self.session_log = []     # session-level SETs since the last connect
        self.types = []
        self.type_by_fmt = {}
        self.table_seq = 0
        self.start_time = None
        self.postmaster_start = None
        self.verbose = args.verbose
        self.warnings = []
        self.tally = {}
        self.trace = open(os.environ["FUZZ_TRACE"], "w") if os.environ.get("FUZZ_TRACE") else None

    # -- connection ----------------------------------------------------------

    def connect(self, preload=True):
        deadline = time.time() + 60
        while True:
            try:
                self.conn = psycopg.connect(dbname=DB, autocommit=True)
                break
            except psycopg.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.5)
        self.conn.add_notice_handler(self.on_notice)
        self.raw("SET statement_timeout = '20s'")
        self.raw("SET lock_timeout = '10s'")
        self.raw("SET client_min_messages = warning")
        if preload:
            self.raw("SELECT fencing.token_accepts(0, 1, false)")
        self.session_log = []

    def on_notice(self, diag):
        """WARNINGs about leaked resources are bugs even when the statement succeeds."""
        text = diag.message_primary or ""
        if diag.severity_nonlocalized == "WARNING" and ("leak" in text or "still referenced" in text):
            self.warnings.append(text)

    def raw(self, sql):
        cur = self.conn.execute(sql)
        return cur.fetchall() if cur.description else None

    def q(self, sql):
        """A query of the harness itself (as the superuser)."""
        return self.raw(sql)

    def canonical(self, sql):
        """A harness query whose text output must not depend on the fuzzed session settings."""
        self.raw("BEGIN")
        try:
            self.raw("SET LOCAL DateStyle = 'ISO, YMD'")
            self.raw("SET LOCAL TimeZone = 'UTC'")
            self.raw("SET LOCAL IntervalStyle = 'postgres'")
            self.raw("SET LOCAL extra_float_digits = 1")
            self.raw("SET LOCAL bytea_output = 'hex'")
            self.raw("SET LOCAL search_path = pg_catalog")  # format_type() then qualifies every other type
            rows = self.raw(sql)
        except psycopg.Error:
            if self.alive():
                self.raw("ROLLBACK")
            raise
        self.raw("COMMIT")
        return rows

    def alive(self):
        try:
            return self.conn is not None and not self.conn.closed and not self.conn.broken
        except Exception:
            return False

    # -- set up ---------------------------------------------------------------

    def admin(self):
        """A connection for CREATE/DROP DATABASE: PGDATABASE, unless that is ours."""
        if os.environ.get("PGDATABASE") == DB:
            return psycopg.connect(dbname="postgres", autocommit=True)
        return psycopg.connect(autocommit=True)

    def create_database(self):
        with self.admin() as a:
            a.add_notice_handler(lambda d: None)
            a.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
            for role in (READER, WRITER):
                a.execute("DROP ROLE IF EXISTS %s" % role)
            a.execute("CREATE DATABASE %s TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C'" % DB)
            a.execute("CREATE ROLE %s NOLOGIN" % READER)
            a.execute("CREATE ROLE %s NOLOGIN" % WRITER)
            self.postmaster_start = a.execute("SELECT pg_postmaster_start_time()").fetchone()[0]

    def drop_database(self):
        try:
            if self.conn is not None and not self.conn.closed:
                self.conn.close()
        except Exception:
            pass
        with self.admin() as a:
            a.add_notice_handler(lambda d: None)
            a.execute("DROP DATABASE IF EXISTS %s WITH (FORCE)" % DB)
            for role in (READER, WRITER):
                a.execute("DROP ROLE IF EXISTS %s" % role)

    def prepare(self):
        self.raw("CREATE EXTENSION fencing")
        has_citext = has_icu = False
        try:
            self.raw("CREATE EXTENSION IF NOT EXISTS citext")
            has_citext = True
        except psycopg.Error:
            pass
        stmts = [
            ("CREATE EXTENSION IF NOT EXISTS fencing", ["*"]),
            ("CREATE ROLE %s NOLOGIN" % READER, [READER]),
            ("CREATE ROLE %s NOLOGIN" % WRITER, [WRITER]),
            ("CREATE SCHEMA fz", ["*"]),
            ('CREATE SCHEMA "Odd ""schema"" ü"', ['"Odd ""schema"" ü"']),
            ("GRANT USAGE ON SCHEMA fencing, fz, \"Odd \"\"schema\"\" ü\", public TO %s, %s" % (READER, WRITER),
             [READER, WRITER]),
            ("CREATE TYPE fz.mood AS ENUM ('sad', 'ok', 'happy', 'wéird \"q\"')", ["fz.mood"]),
            ("CREATE TYPE fz.pair AS (a int, b text)", ["fz.pair"]),
            ("CREATE DOMAIN fz.dpos AS int CHECK (VALUE > 0)", ["fz.dpos"]),
            ("CREATE DOMAIN fz.dshort AS text CHECK (char_length(VALUE) <= 5)", ["fz.dshort"]),
            ("CREATE DOMAIN fz.dnn AS text NOT NULL", ["fz.dnn"]),
            ("CREATE SEQUENCE fz.nest_seq", ["fz.nest_seq"]),
            ("GRANT USAGE ON SEQUENCE fz.nest_seq TO %s, %s" % (READER, WRITER), ["fz.nest_seq"]),
            ("CREATE TABLE fz.nest_target (id int PRIMARY KEY, n int)", ["fz.nest_target"]),
            ("INSERT INTO fz.nest_target VALUES (0, 0), (1, 0), (2, 0)", ["fz.nest_target"]),
            ("SELECT fencing.protect('fz.nest_target')", ["fz.nest_target"]),
            ("GRANT SELECT, UPDATE ON fz.nest_target TO %s" % WRITER, ["fz.nest_target"]),
            ("GRANT SELECT ON fz.nest_target TO %s" % READER, ["fz.nest_target"]),
            ("CREATE FUNCTION fz.nested_check(v int) RETURNS boolean LANGUAGE plpgsql AS $$\n"
             "BEGIN\n"
             "  IF v IS NOT NULL THEN\n"
             "    PERFORM fencing.fenced_update('fz.nest_target', jsonb_build_object('id', abs(v % 3)),\n"
             "                                  nextval('fz.nest_seq'), jsonb_build_object('n', v), 'skip');\n"
             "  END IF;\n"
             "  RETURN true;\n"
             "END $$", ["fz.nested_check"]),
            ("CREATE DOMAIN fz.dnest AS int CHECK (fz.nested_check(VALUE))", ["fz.dnest"]),
            ("CREATE FUNCTION fz.trg_skip() RETURNS trigger LANGUAGE plpgsql AS $$\n"
             "BEGIN\n"
             "  IF TG_OP = 'UPDATE' AND (NEW::text LIKE '%skip%' OR md5(NEW::text) < '5') THEN RETURN NULL; END IF;\n"
             "  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;\n"
             "  RETURN NEW;\n"
             "END $$", ["fz.trg_skip"]),
            ("CREATE FUNCTION fz.trg_nested() RETURNS trigger LANGUAGE plpgsql AS $$\n"
             "BEGIN\n"
             "  IF pg_trigger_depth() < 3 THEN\n"
             "    PERFORM fencing.fenced_update('fz.nest_target', jsonb_build_object('id', pg_trigger_depth() % 3),\n"
             "                                  nextval('fz.nest_seq'), '{\"n\": 7}', 'skip');\n"
             "  END IF;\n"
             "  IF TG_OP = 'DELETE' THEN RETURN OLD; END IF;\n"
             "  RETURN NEW;\n"
             "END $$", ["fz.trg_nested"]),
            ("CREATE TABLE fz.rule_log (at timestamptz DEFAULT now(), what text)", ["fz.rule_log"]),
            ("CREATE FUNCTION fz.trg_audit() RETURNS trigger LANGUAGE plpgsql AS $$\n"
             "BEGIN\n"
             "  INSERT INTO fz.rule_log (what) VALUES (TG_TABLE_NAME);\n"
             "  RETURN NULL;\n"
             "END $$", ["fz.trg_audit"]),
            # Re-entrant: its trigger calls fenced_update() on the same table with the
            # same plan shape while the outer call's plans are in use.
            ("CREATE TABLE fz.reentrant (id int PRIMARY KEY, v int, last_fencing_token bigint NOT NULL DEFAULT 0)",
             ["fz.reentrant"]),
            ("INSERT INTO fz.reentrant (id, v) SELECT g, 0 FROM generate_series(0, 4) g", ["fz.reentrant"]),
            ("SELECT fencing.protect('fz.reentrant')", ["fz.reentrant"]),
            ("GRANT SELECT, INSERT, UPDATE, DELETE ON fz.reentrant TO %s" % WRITER, ["fz.reentrant"]),
            ("GRANT SELECT ON fz.reentrant TO %s" % READER, ["fz.reentrant"]),
            ("CREATE FUNCTION fz.trg_reenter() RETURNS trigger LANGUAGE plpgsql AS $$\n"
             "BEGIN\n"
             "  IF pg_trigger_depth() < 3 THEN\n"
             "    PERFORM fencing.fenced_update('fz.reentrant', jsonb_build_object('id', (NEW.id + 1) % 5),\n"
             "                                  nextval('fz.nest_seq') + 1000000, jsonb_build_object('v', NEW.v), 'skip');\n"
             "  END IF;\n"
             "  RETURN NEW;\n"
             "END $$", ["fz.reentrant", "fz.trg_reenter"]),
            ("CREATE TRIGGER aa_reenter BEFORE UPDATE ON fz.reentrant FOR EACH ROW EXECUTE FUNCTION fz.trg_reenter()",
             ["fz.reentrant"]),
        ]
        if has_citext:
            stmts.insert(1, ("CREATE EXTENSION IF NOT EXISTS citext", ["citext"]))
        for sql, tags in stmts:
            if sql.startswith("CREATE ROLE") or sql.startswith("CREATE EXTENSION"):
                self.setup.append((sql, tags))
                continue
            self.raw(sql)
            self.setup.append((sql, tags))
        try:
            sql = "CREATE COLLATION fz.ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)"
            self.raw(sql)
            self.setup.insert(5, (sql, ["fz.ci"]))
            has_icu = True
        except psycopg.Error:
            pass
        self.types = build_types(has_citext, has_icu)
        # format_type() of each type, to recognise columns when reading tables back.
        cols = ", ".join("c%d %s" % (i, t.ddl) for i, t in enumerate(self.types))
        self.raw("CREATE TEMP TABLE fz_types (%s)" % cols)
        for name, fmt in self.canonical("SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                                        "WHERE attrelid = 'pg_temp.fz_types'::regclass AND attnum > 0 ORDER BY attnum"):
            self.type_by_fmt.setdefault(fmt, self.types[int(name[1:])])
        self.raw("DROP TABLE fz_types")
        self.catalog_ok = self.raw("SHOW allow_system_table_mods")[0][0] == "off"
        fixed = Rel("r", "fz.reentrant")
        fixed.fixed = True
        fixed.oid = self.q("SELECT 'fz.reentrant'::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8")[0][0]
        self.rels.append(fixed)
        self.introspect(fixed)
        self.refresh(fixed)
        self.has_citext, self.has_icu = has_citext, has_icu

    # -- reading relations back ----------------------------------------------

    def introspect(self, rel):
        if rel.oid is None:
            return
        rows = self.canonical("SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attgenerated, a.attidentity, "
                      "a.attnotnull, a.attisdropped, pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a "
                      "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
                      "WHERE a.attrelid = %d AND a.attnum > 0 ORDER BY a.attnum" % rel.oid)
        rel.cols, rel.dropped = [], []
        for name, fmt, gen, ident_, notnull, dropped, default in rows:
            if dropped:
                rel.dropped.append(name)
                continue
            typ = self.type_by_fmt.get(fmt)
            if typ is None:  # e.g. numeric(5,1) after ALTER COLUMN TYPE: values as text, cast to it
                typ = Type(fmt, cast=fmt, key=False, gen=lambda r: rtext(r, 2), weight=0)
                self.type_by_fmt[fmt] = typ
            col = Col(name, fmt, typ, gen != "", ident_ != "", notnull)
            col.default = default
            rel.cols.append(col)
        key = self.q("SELECT a.attname, i.indimmediate FROM pg_index i, unnest(i.indkey) WITH ORDINALITY k(n, o) "
                     "JOIN pg_attribute a ON a.attnum = k.n WHERE i.indrelid = %d AND i.indisprimary "
                     "AND a.attrelid = i.indrelid AND k.o <= i.indnkeyatts ORDER BY k.o" % rel.oid)
        rel.key = [k[0] for k in key]
        rel.pk_immediate = all(k[1] for k in key) if key else True
        info = self.q("SELECT relkind, relhasrules, relrowsecurity, relpersistence FROM pg_class WHERE oid = %d"
                      % rel.oid)
        if info:
            rel.kind, rel.rules, rel.rls = info[0][0], info[0][1], info[0][2]
            rel.temp = info[0][3] == "t"
        # The guard's settings are its trigger's arguments (cloned to partitions).
        g = self.q("SELECT tgargs, tgparentid = 0 FROM pg_catalog.pg_trigger WHERE tgrelid = %d "
                   "AND tgname = 'fencing_guard' AND tgfoid = 'fencing.guard()'::pg_catalog.regprocedure "
                   "AND tgenabled <> 'D'" % rel.oid)
        rel.guarded = bool(g)
        rel.own_guard = bool(g) and g[0][1]
        # fenced_update() takes the settings from the registry: the table's own
        # registration or its nearest protected ancestor's, whatever its
        # triggers (an owner may have dropped or disabled them).
        rel.token_col, rel.mode = None, None
        p = self.q("SELECT p.token_column, p.mode FROM (SELECT %d::pg_catalog.regclass AS relid, 0::bigint AS n "
                   "UNION ALL SELECT a.relid, a.n FROM pg_catalog.pg_partition_ancestors(%d) WITH ORDINALITY a(relid, n)) a "
                   "JOIN fencing.protected_tables p ON p.relation = a.relid ORDER BY a.n LIMIT 1" % (rel.oid, rel.oid))
        if p:
            rel.token_col, rel.mode = p[0][0], p[0][1]

    def token_column_of(self, rel):
        """The column fenced_update() would use: the guard's, else last_fencing_token."""
        if rel.token_col:
            return rel.token_col
        c = rel.col("last_fencing_token")
        return "last_fencing_token" if c is not None and c.fmt == "bigint" else None

    def refresh(self, rel, check=True, case=None):
        """Reads keys and tokens back; checks that no stored token went down."""
        if rel.oid is None or not rel.is_table() or not rel.key:
            return
        if any(rel.col(k) is None for k in rel.key):
            return
        tok = self.token_column_of(rel)
        sel = ", ".join("(%s)::pg_catalog.text" % qi(k) for k in rel.key)
        sel += ", (%s)::pg_catalog.text" % qi(tok) if tok else ", NULL"
        try:
            rows = self.canonical("SELECT %s FROM %s LIMIT 300" % (sel, rel.qname))
        except psycopg.Error as e:
            if not self.alive():
                raise
            self.note("refresh of %s failed: %s" % (rel.qname, e))
            return
        old = rel.rows
        rel.rows = {}
        for row in rows:
            t = row[-1]
            rel.rows[tuple(row[:-1])] = t if t is not None and re.fullmatch(r"-?[0-9]+", t) else None
        for k in old:
            if k not in rel.rows and k not in rel.deleted:
                rel.deleted.append(k)
        del rel.deleted[:-40]
        tokens = [int(t) for t in rel.rows.values() if t is not None]
        rel.high = max(tokens + [rel.high])
        # The stored token of a row never goes down, and a deleted key's
        # mark outlives it: per key, the highest token seen is a floor.
        sig = (rel.token_col, tuple(rel.key)) if (rel.token_col and rel.own_guard and not rel.has_handmade()) else None
        if sig is None or sig != rel.model_sig:
            rel.model_sig = sig
            rel.model = {} if sig else None
        if rel.model is None:
            return
        for k, t in rel.rows.items():
            if t is None:
                continue
            t = int(t)
            seen = rel.model.get(k)
            if check and seen is not None and t < seen and case is not None:
                self.fail(case, None, "stored token of key %s went down from %d to %d (a stale write was accepted)"
                          % (k, seen, t))
            rel.model[k] = max(t, seen or t)

    def forget_temp(self):
        gone = [x for x in self.rels if x.temp or "pg_temp." in x.qname or (x.base is not None and x.base.temp)]
        for x in gone:
            if x.oid is not None:
                self.dropped_oids.append(x.oid)
        self.rels = [x for x in self.rels if x not in gone]

    def forget_missing(self):
        oids = [r.oid for r in self.rels if r.oid is not None]
        alive = set()
        if oids:
            alive = {row[0] for row in self.q("SELECT oid::pg_catalog.int8 FROM pg_catalog.pg_class WHERE oid = ANY('{%s}'::pg_catalog.oid[])"
                                              % ",".join(str(o) for o in oids))}
        keep = []
        for r in self.rels:
            if r.oid is not None and r.oid in alive:
                keep.append(r)
            elif r.oid is not None:
                self.dropped_oids.append(r.oid)
        del self.dropped_oids[:-20]
        self.rels = keep

    # -- reporting -------------------------------------------------------------

    def note(self, msg):
        if self.verbose:
            print("fuzz: note: %s" % msg, flush=True)

    def fail(self, case, err, why):
        code = getattr(err, "sqlstate", None) if err is not None else None
        msg = ""
        if err is not None:
            diag = getattr(err, "diag", None)
            msg = (diag.message_primary if diag is not None and diag.message_primary else str(err)).strip()
        sig = (case.kind, code, re.sub(r"\"[^\"]*\"|'[^']*'|[0-9]+", "_", why)[:80],
               re.sub(r"\"[^\"]*\"|[0-9]+", "_", msg)[:60])
        n = self.failure_sigs.get(sig, 0) + 1
        self.failure_sigs[sig] = n
        self.failures.append((self.step, case.kind, code, why, msg))
        if n > 3:  # the first three of a kind in full, the others in one line each
            print("fuzz: failure at step %d (like the above): %s %s: %s" % (self.step, case.kind, code, why[:120]),
                  flush=True)
            return
        print(self.repro(case, code, msg, why), flush=True)

    def repro(self, case, code, msg, why):
        out = ["", "-- FUZZ FAILURE at step %d (seed %d; replay: test/fuzz/run --seed %d --steps %d --seconds 3600)"
               % (self.step, self.seed, self.seed, self.step),
               "-- %s: %s" % (case.kind, why)]
        if code or msg:
            out.append("-- got SQLSTATE %s: %s" % (code, msg.replace("\n", " ")))
        body = []
        seen = []
        for rel in case.rels:
            book = rel.logbook()
            if book in seen:
                continue
            seen.append(book)
            body += book.ddl
            if len(book.log) > 60:
                body.append("-- (%d earlier statements on this table omitted)" % (len(book.log) - 60))
            body += book.log[-60:]
        latest = {}
        for stmt in self.session_log:  # the session's settings as they stand: the last SET of each
            name = stmt.split()[1].lower()
            latest.pop(name, None)
            latest[name] = stmt
        body += list(latest.values())
        body += case.stmts
        text = "\n".join(body)
        need = []
        changed = True
        while changed:
            changed = False
            for sql, tags in self.setup:
                if sql in need:
                    continue
                if "*" in tags or any(t in text for t in tags):
                    need.append(sql)
                    text += "\n" + sql
                    changed = True
        out.append("-- setup (run in an empty database as a superuser)")
        out += [s + ";" for s, _ in self.setup if s in need]
        out.append("-- the table and what happened to it")
        out += [s if s.startswith("--") else s + ";" for s in body[:len(body) - len(case.stmts)]]
        out.append("-- the failing case")
        out += [s + ";" for s in case.stmts]
        return "\n".join(out)

    def count(self, case, code):
        self.counts[code] = self.counts.get(code, 0) + 1
        k = (case.kind, code)
        self.kind_counts[k] = self.kind_counts.get(k, 0) + 1

    # -- running one case ------------------------------------------------------

    def execute(self, case):
        """Runs a case's statements; returns (error or None, rows of the last statement, rowcount)."""
        rows, rowcount, err = None, -1, None
        failed_at = None
        for i, sql in enumerate(case.stmts):
            try:
                cur = self.conn.execute(sql)
                rows = cur.fetchall() if cur.description else None
                rowcount = cur.rowcount
                case.meta.setdefault("done", []).append(i)
                if rows is not None and "fencing.fenced_update(" in sql:
                    case.meta["call_rows"] = rows
            except psycopg.Error as e:
                err = e
                failed_at = i
                break
        case.meta["failed_at"] = failed_at
        if err is not None and self.alive():
            try:
                if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    self.conn.execute("ROLLBACK")
            except psycopg.Error:
                pass
        if self.alive() and case.role is not None:
            try:
                self.conn.execute("RESET ROLE")
            except psycopg.Error:
                pass
        return err, rows, rowcount

    def judge(self, case, err):
        """None if the error is clean, else why not."""
        code = err.sqlstate
        if code is None:
            return "no SQLSTATE (client-side error or lost connection): %s" % err
        if case.kind == "ddl":
            return "DDL failed with an internal-looking SQLSTATE" if code.startswith(DDL_FATAL_CLASSES) else None
        if code in DOCUMENTED or class_ok(code) or code in EXTRA.get(case.kind, ()) or code in case.extra:
            return None
        return "undocumented SQLSTATE %s" % code

    def run_case(self, case):
        self.step += 1
        if case.kind in ("fenced_update", "protect", "helper") and case.meta.get("target", "").startswith("'"):
            case.extra |= {"3F000", "42602"}  # regclass input of our literal: a gone temp schema, bad syntax
        if self.verbose:
            print("-- step %d %s\n%s" % (self.step, case.kind, "\n".join(s + ";" for s in case.stmts)), flush=True)
        self.warnings = []
        err, rows, rowcount = self.execute(case)
        if self.warnings:
            self.fail(case, None, "WARNING: %s" % "; ".join(self.warnings[:2]))
            self.warnings = []
        if err is not None and not self.alive():
            self.count(case, "CRASH")
            self.fail(case, err, "the connection was lost (server crash?)")
            self.recover()
            return err, rows, rowcount
        code = "00000" if err is None else (err.sqlstate or "client")
        self.count(case, code)
        if self.trace is not None:
            msg = "" if err is None else (err.diag.message_primary or "")
            self.trace.write("%d\t%s\t%s\t%s\n" % (self.step, case.kind, code, msg.replace("\n", " ")[:150]))
        if err is not None:
            if case.kind == "fenced_update" and err.sqlstate is not None:
                why = self.check_conversion(case, err)
            else:
                why = self.judge(case, err)
            if why is not None:
                self.fail(case, err, why)
        return err, rows, rowcount

    def recover(self):
        try:
            self.conn.close()
        except Exception:
            pass
        time.sleep(1)
        self.connect()
        self.forget_temp()
        self.forget_missing()

    def log_success(self, case, rel):
        if rel is None:
            return
        book = rel.logbook()
        done = case.meta.get("done", [])
        for i in done:
            book.log.append(case.stmts[i])
        if case.role is not None:
            book.log.append("RESET ROLE")

    # -- oracles -----------------------------------------------------------------

    def check_conversion(self, case, err):
        """A value that does not convert must fail with its type's own SQLSTATE."""
        msg = err.diag.message_primary or ""
        m = re.match(r'invalid value for column "(.*)" of relation "(.*)": ', msg, re.S)
        code = err.sqlstate
        if m is None:
            return self.judge(case, err)
        col = m.group(1)
        key = case.meta.get("key_dict") if isinstance(case.meta.get("key_dict"), dict) else {}
        if case.meta.get("key_json") is None or isinstance(case.meta.get("key_json"), Raw):
            key = {}  # the key argument was NULL or hostile JSON of its own
        changes = case.meta.get("changes") if isinstance(case.meta.get("changes"), dict) else {}
        rel = case.rel
        c = rel.col(col) if rel is not None else None
        fallback_ok = class_ok(code) or code in INPUT_CODES or code in DOCUMENTED or code in case.extra
        if col in key and col in changes and to_json(key[col]) != to_json(changes[col]):
            v = Ellipsis
        else:
            v = key.get(col, changes.get(col, Ellipsis))
        if c is None or v is Ellipsis or v is None or isinstance(v, (list, dict, Raw)) or \
                (c.typ is not None and (c.typ.json_col or c.typ.ddl == "fz.dnest")):
            return None if fallback_ok else "conversion failed with SQLSTATE %s" % code
        if isinstance(v, Num):
            text = self.q("SELECT %s::pg_catalog.jsonb OPERATOR(pg_catalog.#>>) '{}'" % ql(str(v)))[0][0]
        else:
            text = plain_text(v)
        # COPY calls the column type's input function with the column's
        # typmod, as fenced_update() does (an INSERT of a literal would pass
        # typmod -1 and coerce afterwards, which reports some errors in
        # another order).
        try:
            self.conn.execute("BEGIN")
            self.conn.execute("CREATE TEMP TABLE fz_probe (c %s) ON COMMIT DROP" % c.fmt)
            with self.conn.cursor().copy("COPY fz_probe (c) FROM STDIN") as copy:
                copy.write_row((text,))
            expected = "00000"
        except psycopg.Error as e:
            expected = e.sqlstate
        finally:
            if self.alive():
                self.conn.execute("ROLLBACK")
        if expected == code:
            return None
        if expected == "00000":
            if case.role is not None:  # e.g. regclass names a relation the role may not see
                return None if fallback_ok else "conversion failed with SQLSTATE %s" % code
            return ("value %s for column %s (%s) converts in plain SQL, but fenced_update() refused it with %s"
                    % (ql(text)[:80], qi(col), c.fmt, code))
        return ("value %s for column %s (%s) failed with SQLSTATE %s, but the type's own input gives %s"
                % (ql(text)[:80], qi(col), c.fmt, code, expected))

    def check_domains(self, case, rel, changes):
        """Values stored by fenced_update() must satisfy their columns' domains."""
        for name in changes:
            c = rel.col(name)
            if c is None or c.typ is None or c.typ.domain is None:
                continue
            try:
                self.q("SELECT count(CAST(CAST(%s AS %s) AS %s)) FROM %s" % (qi(name), c.typ.domain, c.fmt,
                                                                             rel.qname))
            except psycopg.Error as e:
                if not self.alive():
                    raise
                self.fail(case, e, "fenced_update() stored a value in column %s that domain %s refuses"
                          % (qi(name), c.fmt))

    def key_where(self, rel, key_json, key):
        """WHERE clause matching fenced_update()'s key, or None when it cannot be written alike."""
        parts = []
        for k in rel.key:
            c = rel.col(k)
            if c is None or k not in key:
                return None
            v = key[k]
            if v is None or isinstance(v, (list, dict, Raw)) or c.typ is None or c.typ.json_col:
                return None
            parts.append("%s = (%s::pg_catalog.jsonb OPERATOR(pg_catalog.->>) %s)::%s" % (qi(k), ql(key_json), ql(k), c.fmt))
        return " AND ".join(parts) if parts else None

    # -- generators: targets -------------------------------------------------------

    def tables(self):
        return [r for r in self.rels if r.is_table()]

    def pick_rel(self, tables_only=True):
        pool = self.tables() if tables_only else self.rels
        return self.r.choice(pool) if pool else None

    def hostile_target(self):
        r = self.r
        opts = ["NULL", "NULL::regclass", "0::regclass", "'-'::regclass", "999999::regclass", "'fz.nest_target'",
                "'fencing.deleted_keys'", "'fencing.protected_tables'", "'fencing.token_seq'", "'fz.pair'",
                "'fencing.leases'", "'fz.rule_log'", "'pg_catalog.pg_am'", "'nonexistent_table'",
                "'\"fz\".\"\"'", "'4294967295'::oid::regclass", "'fencing.deleted_keys_pkey'"]
        if self.dropped_oids:
            opts += ["%d::regclass" % r.choice(self.dropped_oids)] * 3
        others = [x for x in self.rels if not x.is_table()]
        if others:
            opts += [ql(r.choice(others).qname)] * 4
        t = self.pick_rel()
        if t is not None and t.oid:
            opts.append("(SELECT reltoastrelid FROM pg_class WHERE oid = %d)::regclass" % t.oid)
            opts.append("(SELECT indexrelid FROM pg_index WHERE indrelid = %d LIMIT 1)::regclass" % t.oid)
        return r.choice(opts)

    def target_text(self, rel):
        r = self.r
        c = r.random()
        if c < 0.6:
            return ql(rel.qname)
        if c < 0.85:
            return ql(rel.qname) + "::regclass"
        return "%d::regclass" % rel.oid

    # -- generators: values ------------------------------------------------------

    def value(self, c, bad=0.08, null=0.05):
        r = self.r
        x = r.random()
        if c.typ is None:
            return rtext(r)
        if x < null:
            return None
        if x < null + bad:
            return c.typ.bad(r)
        return c.typ.gen(r)

    def sql_value(self, v, c):
        typ = c.typ
        cast = typ.cast if typ is not None else "text"
        if v is None:
            return "NULL::" + cast
        if typ is not None and typ.json_col:
            return ql(to_json(v)) + "::" + cast
        if v is True or v is False:
            return ql(plain_text(v)) + "::" + cast
        if isinstance(v, list) and not isinstance(v, Pairs):
            if typ is not None and typ.array:
                return ql(array_literal(v)) + "::" + cast
            return ql(to_json(v)) + "::" + cast
        if isinstance(v, (dict, Pairs)):
            return ql(to_json(v)) + "::" + cast
        return ql(str(v)) + "::" + cast

    def key_value_from_text(self, text, c):
        """A stored key's text form as a JSON value (mostly the string itself)."""
        r = self.r
        if c.typ is not None and c.typ.json_col:
            return Raw(text) if r.random() < 0.8 else text
        if c.typ is not None and c.typ.ddl in ("int2", "int4", "int8", "numeric", "float8", "oid") and \
                re.fullmatch(r"-?[0-9]+(\.[0-9]+)?", text or "") and r.random() < 0.5:
            return Num(text)
        return text

    def pick_key(self, rel):
        """A key for rel: an existing row's, a deleted one's, a new one, or a broken one."""
        r = self.r
        key = {}
        cols = [rel.col(k) for k in rel.key]
        if None in cols or not cols:
            return {"id": N(1)}, False
        c = r.random()
        source = None
        if c < 0.55 and rel.rows:
            source = r.choice(list(rel.rows.keys()))
        elif c < 0.7 and rel.deleted:
            source = r.choice(rel.deleted)
        for i, col in enumerate(cols):
            if source is not None and source[i] is not None:
                key[col.name] = self.key_value_from_text(source[i], col)
            else:
                key[col.name] = self.value(col, bad=0.03, null=0.0)
        return key, source is not None

    def mutate_key(self, rel, key):
        r = self.r
        key = dict(key)
        m = r.randint(0, 11)
        names = list(key)
        if m == 0 and names:
            del key[r.choice(names)]
        elif m == 1:
            nonkey = [c.name for c in rel.cols if c.name not in rel.key]
            if nonkey:
                key[r.choice(nonkey)] = N(1)
        elif m == 2:
            key[r.choice(["ctid", "xmin", "oid", "tableoid", "", "no such column", "ID", "Id"])] = N(1)
        elif m == 3 and rel.dropped:
            key[r.choice(rel.dropped)] = N(1)
        elif m == 4 and names:
            k = r.choice(names)
            c = rel.col(k)
            key[k] = c.typ.bad(r) if c is not None and c.typ is not None else "x"
        elif m == 5 and names:
            key[r.choice(names)] = None
        elif m == 6 and names:
            key[r.choice(names)] = r.choice([{"nested": {"deep": [N(1)]}}, [N(1), N(2)], [], {}, True, deep(r)])
        elif m == 7 and names:
            k = r.choice(names)
            return Pairs([(k, N(1))] + list(key.items()))
        elif m == 8:
            tok = self.token_column_of(rel)
            if tok:
                key[tok] = N(1)
        elif m == 9 and names:
            key[r.choice(names)] = r.choice([Raw('"\\u0000"'), Raw('"\\ud800"'), Raw('"\\uDFFF\\uD800"'),
                                             "x" * r.choice([3000, 100000]), Num("1e400"), Num("-0"),
                                             Num("1" * 400), Raw("1e1000000")])
        elif m == 10 and names:
            k = r.choice(names)
            key[k.upper() if k.upper() != k else k.lower()] = key.pop(k)
        else:
            gen = [c for c in rel.cols if c.generated or c.identity]
            if gen:
                key[r.choice(gen).name] = N(1)
        return key

    def hostile_json(self):
        r = self.r
        return r.choice([Raw("null"), Raw("[]"), Raw('"str"'), Raw("1"), Raw("{}"), Raw("{"), Raw('{"a":1,}'),
                         deep(r), Raw('{"\\u0000": 1}'), Raw('{"k": "\\ud800"}'), Raw("[{}]"), Raw("true"),
                         Raw('{"a": 1}  '), Raw(" "), Raw('{"a": NaN}')])

    def pick_token(self, rel, key_tuple=None):
        r = self.r
        stored = None
        if rel is not None and key_tuple is not None and rel.rows.get(key_tuple) is not None:
            stored = int(rel.rows[key_tuple])
        hi = stored if stored is not None else (rel.high if rel is not None else 0)
        c = r.random()
        if c < 0.35:
            return min(INT64_MAX, hi + r.randint(1, 5))
        if c < 0.5:
            return max(hi, 1)
        if c < 0.65:
            return max(1, hi - r.randint(1, 5))
        return r.choice([1, 0, -1, None, INT64_MAX, INT64_MIN, r.randint(1, 2 ** 62)] +
                        [2, 3, 1000, min(INT64_MAX, hi + 1)] * 3)

    def token_sql(self, t):
        r = self.r
        if t is None:
            return r.choice(["NULL", "NULL::bigint", "NULL::int"])
        if t < 0 or r.random() < 0.15:
            return r.choice(["'%d'" % t, "'%d'::bigint" % t, "(%s)::bigint" % ql(str(t))])
        return r.choice(["%d" % t, "%d::bigint" % t])

    # -- generators: cases -----------------------------------------------------------

    def role(self):
        x = self.r.random()
        return None if x < 0.78 else (WRITER if x < 0.9 else READER)

    def with_role(self, case, stmts):
        case.stmts = (["SET ROLE %s" % case.role] if case.role else []) + stmts
        return case

    def gen_fenced_update(self):
        r = self.r
        rel = self.pick_rel() if r.random() < 0.93 else None
        case = Case("fenced_update", [], rel, self.role())
        key_tuple = None
        if rel is None:
            target = self.hostile_target()
            key = {"id": N(r.randint(0, 3))}
        else:
            target = self.target_text(rel)
            key, existing = self.pick_key(rel)
            if existing and rel.key and all(k in key for k in rel.key):
                key_tuple = tuple(plain_text(key[k]) for k in rel.key)
            if r.random() < 0.2:
                key = self.mutate_key(rel, key)
        key_items = list(key) if isinstance(key, Pairs) else list(key.items())
        case.meta["target"] = target
        case.meta["key"] = key if not isinstance(key, Pairs) else None
        case.meta["key_dict"] = dict(key) if isinstance(key, Pairs) else key  # jsonb keeps the last duplicate
        case.meta["key_items"] = key_items
        if r.random() < 0.02:
            key_sql = r.choice(["NULL", "NULL::jsonb"])
            key_json = None
        elif r.random() < 0.03:
            key_json = self.hostile_json()
            key_sql = ql(key_json) + r.choice(["::jsonb", ""])
        else:
            key_json = to_json(key)
            key_sql = ql(key_json) + r.choice(["::jsonb", "", "::json::jsonb"])
        case.meta["key_json"] = key_json
        token = self.pick_token(rel, key_tuple)
        case.meta["token"] = token
        # changes
        changes = {}
        c = r.random()
        changes_sql = None
        if rel is not None and c < 0.75:
            cand = [x for x in rel.cols if x.name not in rel.key and x.name != self.token_column_of(rel)]
            for x in r.sample(cand, min(len(cand), r.randint(1, 3))):
                if x.generated or x.identity:
                    if r.random() < 0.3:
                        changes[x.name] = N(1)
                    continue
                v = self.value(x)
                if isinstance(v, str) and not isinstance(v, (Num, Raw)) and r.random() < 0.05:
                    v = v + "skip"
                changes[x.name] = v
            if r.random() < 0.12:
                m = r.randint(0, 5)
                if m == 0 and self.token_column_of(rel):
                    changes[self.token_column_of(rel)] = N(token if token is not None else 1)
                elif m == 1 and rel.key:
                    changes[r.choice(rel.key)] = N(1)
                elif m == 2:
                    changes[r.choice(["missing", "", "ctid", "LAST_FENCING_TOKEN"])] = "x"
                elif m == 3 and rel.dropped:
                    changes[r.choice(rel.dropped)] = "x"
                elif m == 4:
                    gen = [x for x in rel.cols if x.generated or x.identity]
                    if gen:
                        changes[r.choice(gen).name] = N(2)
                else:
                    changes_sql = ql(to_json(self.hostile_json()))
        elif c > 0.96:
            changes_sql = r.choice(["NULL", "NULL::jsonb", ql(to_json(self.hostile_json()))])
        case.meta["changes"] = changes if changes_sql is None else None
        if changes_sql is None:
            changes_sql = ql(to_json(changes)) + r.choice(["", "::jsonb"])
        # on_stale
        on_stale = r.choice([None] * 50 + ["'error'"] * 15 + ["'skip'"] * 25 +
                            ["NULL", "'ERROR'", "'skip '", "''", "'Skip'", "'ignore'", "'skip\u0301'"])
        case.meta["on_stale"] = on_stale
        tok_sql = self.token_sql(token)
        omit_changes = on_stale is None and changes_sql.startswith("'{}'") and r.random() < 0.5
        if r.random() < 0.25:
            args = ["target => %s" % target, "key => %s" % key_sql, "token => %s" % tok_sql]
            if not omit_changes:
                args.append("changes => %s" % changes_sql)
            if on_stale is not None:
                args.append("on_stale => %s" % on_stale)
            r.shuffle(args)
        else:
            args = [target, key_sql, tok_sql]
            if not omit_changes or on_stale is not None:
                args.append(changes_sql)
            if on_stale is not None:
                args.append(on_stale)
        call = "SELECT fencing.fenced_update(%s)" % ", ".join(args)
        stmts = [call]
        if r.random() < 0.08:
            stmts = [r.choice(["BEGIN ISOLATION LEVEL SERIALIZABLE", "BEGIN ISOLATION LEVEL REPEATABLE READ",
                               "BEGIN"]), call, "COMMIT"]
        if rel is not None and self.family_handmade(rel):
            case.extra.add("39P01")
        if rel is not None and getattr(rel, "fixed", False):
            case.extra |= FIXED_EXTRA
        if "[[[[[[[" in key_sql or "[[[[[[[" in changes_sql or '{"a":{"a":' in key_sql + changes_sql:
            case.extra |= {"54000", "54001"}
        self.with_role(case, stmts)
        err, rows, _ = self.run_case(case)
        if rel is None or not self.alive():
            return
        if err is None:
            rows = case.meta.get("call_rows")
            result = rows[0][0] if rows else None
            self.tally["fenced_update() returned %s" % ("true" if result else "false")] = \
                self.tally.get("fenced_update() returned %s" % ("true" if result else "false"), 0) + 1
            if result is True and case.meta["changes"]:
                self.check_domains(case, rel, case.meta["changes"])
            if result is True and isinstance(case.meta["key"], dict) and key_json is not None:
                self.check_applied(case, rel, key_json, case.meta["key"], token)
            self.refresh_family(rel, case)
            self.log_success(case, rel)
        elif err.sqlstate == "P0002" and case.role is None and isinstance(case.meta["key"], dict) and \
                key_json is not None and not getattr(rel, "fixed", False):
            # (fz.reentrant's trigger makes nested calls that may miss their own rows)
            where = self.key_where(rel, key_json, case.meta["key"])
            if where is not None:
                try:
                    n = self.q("SELECT count(*) FROM %s WHERE %s" % (rel.qname, where))[0][0]
                except psycopg.Error:
                    n = 0
                    if not self.alive():
                        raise
                if n > 0:
                    self.fail(case, err, "P0002 (no row) although the superuser sees the row")

    def check_applied(self, case, rel, key_json, key, token):
        tok = self.token_column_of(rel)
        where = self.key_where(rel, key_json, key)
        if tok is None or where is None or rel.col(tok) is None or rel.col(tok).fmt != "bigint":
            return
        try:
            rows = self.q("SELECT (%s)::pg_catalog.text FROM %s WHERE %s" % (qi(tok), rel.qname, where))
        except psycopg.Error:
            if not self.alive():
                raise
            return
        if len(rows) == 1 and rows[0][0] != str(token):
            self.fail(case, None, "fenced_update() returned true but the stored token is %s, not %s"
                      % (rows[0][0], token))

    def refresh_family(self, rel, case):
        fam = [rel]
        b = rel.base
        while b is not None:
            fam.append(b)
            b = b.base
        fam += [x for x in self.rels if x.base is rel]
        for x in fam:
            if x.is_table():
                self.refresh(x, case=case)

    def gen_protect(self):
        r = self.r
        rel = self.pick_rel() if r.random() < 0.85 else None
        case = Case("protect", [], rel, None if r.random() < 0.85 else r.choice([WRITER, READER]))
        target = self.target_text(rel) if rel is not None else self.hostile_target()
        if not self.catalog_ok and "pg_am" in target:
            target = "'fz.rule_log'"
        case.meta["target"] = target
        # token column
        c = r.random()
        col = None
        if rel is not None and c < 0.45:
            col = None  # default
        elif rel is not None and c < 0.75 and rel.cols:
            col = ql(r.choice(rel.cols).name)
        elif c < 0.8:
            col = "'last_fencing_token'"
        else:
            col = r.choice(["NULL", "''", "' '", "'ctid'", "'xmin'", "'LAST_FENCING_TOKEN'", ql("x" * 80),
                            ql("é" * 40), ql('we"ird \\ tok'), ql("🙂 token"), "'epoch'", "'token'",
                            "'tok' || chr(10)", ql(rel.dropped[0]) if rel is not None and rel.dropped else "'d'"])
        mode = r.choice([None] * 16 + ["'monotonic'"] * 5 + ["'strict'"] * 6 +
                        ["NULL", "''", "'STRICT'", "'monotonic '", "'Monotonic'", "'strict' || chr(9)",
                         "'lax'", ql(rtext(r, 3))])
        if col is None and mode is not None and r.random() < 0.5:
            col = "'last_fencing_token'"
        args = [target]
        if col is not None:
            args.append(col)
        if mode is not None:
            if col is None:
                args = ["target => %s" % target, "mode => %s" % mode]
            else:
                args.append(mode)
        stmts = ["SELECT fencing.protect(%s)" % ", ".join(args)]
        if r.random() < 0.02:
            target = r.choice(["'fencing.deleted_keys'", "'fencing.floors'"])
        if target in ("'fencing.deleted_keys'", "'fencing.floors'") or r.random() < 0.03:
            # Contained: protect (the extension's own tables included), or give
            # those tables an audit trigger of the kind a DBA adds, then write
            # through the guard, then roll back.
            if r.random() < 0.5:
                stmts = ["CREATE TRIGGER fz_audit AFTER INSERT OR UPDATE ON %s FOR EACH ROW "
                         "EXECUTE FUNCTION fz.trg_audit()" % r.choice(["fencing.floors", "fencing.deleted_keys"])]
            stmts = ["BEGIN"] + stmts
            guarded = [x for x in self.tables() if x.guarded and x.key]
            other = r.choice(guarded) if guarded and r.random() < 0.8 else self.pick_rel()
            if other is not None and other.key:
                stmts += ["SET LOCAL fencing.token = %d" % min(INT64_MAX, other.high + 1),
                          "%s %s" % (r.choice(["DELETE FROM", "TRUNCATE"]), other.qname)]
                case.rels.append(other)
                if self.family_handmade(other):
                    case.extra.add("39P01")
            stmts.append("ROLLBACK")
            case.meta["contained"] = True
        if rel is not None and self.family_handmade(rel):
            case.extra.add("39P01")
        self.with_role(case, stmts)
        err, _, _ = self.run_case(case)
        if rel is not None and self.alive():
            if err is None and not case.meta.get("contained"):
                self.log_success(case, rel)
                rel.handmade = False
            self.introspect_family(rel)
            self.refresh_family(rel, None)

    def family_handmade(self, rel):
        return rel.has_handmade() or any(x.handmade for x in self.rels if x.base is rel)

    def introspect_family(self, rel):
        fam = [rel]
        b = rel.base
        while b is not None:
            fam.append(b)
            b = b.base
        fam += [x for x in self.rels if x.base is rel or (x.base is not None and x.base.base is rel)]
        for x in fam:
            try:
                self.introspect(x)
            except psycopg.Error:
                if not self.alive():
                    raise

    def gen_unprotect(self):
        r = self.r
        rel = self.pick_rel() if r.random() < 0.85 else None
        case = Case("protect", [], rel, None if r.random() < 0.9 else WRITER)
        target = self.target_text(rel) if rel is not None else self.hostile_target()
        case.meta["target"] = target
        self.with_role(case, ["SELECT fencing.unprotect(%s)" % target])
        err, _, _ = self.run_case(case)
        if rel is not None and self.alive():
            if err is None:
                self.log_success(case, rel)
            self.introspect_family(rel)
            self.refresh_family(rel, None)

    def gen_helper(self):
        r = self.r
        rel = self.pick_rel()
        target = self.target_text(rel) if rel is not None and r.random() < 0.6 else self.hostile_target()
        fn = r.choice(["fencing_internal._key_change_condition(%s)" % target,  # internal, but callable by PUBLIC
                       "fencing.token_accepts(%s, %s, %s)" % (r.choice(["NULL", "0", "5", "-1"]),
                                                               r.choice(["NULL", "0", "5", "9223372036854775807"]),
                                                               r.choice(["NULL", "true", "false"])),
                       "fencing.guard()",
                       "fencing_internal._drop_guard(%s)" % target if r.random() < 0.2 else "fencing.token_accepts(1, 2, true)"])
        case = Case("helper", [], rel, self.role())
        if fn == "fencing.guard()":
            case.extra.add("39P01")  # a trigger function called directly: PostgreSQL's own code for it
        case.meta["target"] = target
        self.with_role(case, ["SELECT %s" % fn])
        err, _, _ = self.run_case(case)
        if rel is not None and self.alive() and "_drop_guard" in fn and err is None:
            self.log_success(case, rel)
            self.introspect_family(rel)
            self.refresh_family(rel, None)

    # -- writes through the guard ----------------------------------------------------

    def token_text(self, rel):
        r = self.r
        c = r.random()
        if c < 0.88:
            t = self.pick_token(rel)
            if t is None:
                return "''"
            return str(t) if r.random() < 0.5 else ql(str(t))
        return ql(r.choice(["abc", "-1", "0", "1e3", " 7 ", "99999999999999999999", "", "+5", "0x1F",
                            "9223372036854775807", "9223372036854775808", "007", "  ", "NULL", "٣", "7abc",
                            "1 2", "\t8\n", "-0", "1.0", "\u00a09"]))

    @staticmethod
    def valid_token_text(lit):
        """Does a SET value parse as a positive bigint (int8in's rules)?"""
        s = lit[1:-1].replace("''", "'") if lit.startswith("'") else lit
        t = s.strip(" \t\n\v\f\r")
        if not re.fullmatch(r"[+-]?[0-9]+", t):
            return False
        return 0 < int(t) <= INT64_MAX

    def gen_dml(self):
        r = self.r
        pool = [x for x in self.rels if x.kind in ("r", "p", "v")]
        if not pool:
            return
        rel = r.choice(pool)
        table = rel if rel.is_table() else rel.base
        if table is None or table.oid is None or not table.is_table():
            return
        cols = rel.cols
        tok_col = self.token_column_of(table)
        tok = rel.col(tok_col) if tok_col else None
        key = [rel.col(k) for k in table.key if rel.col(k) is not None]
        op = r.choice(["insert"] * 7 + ["update"] * 6 + ["delete"] * 3 + ["upsert"] * 2 + ["merge"] + ["truncate"])
        mode = r.choice(["none"] * 3 + ["set_local"] * 8 + ["set_config"] * 2 + ["set_in_tx"] + ["session"] * 2 +
                        ["explicit"] * 3)
        case = Case("dml", [], rel, self.role())
        judge = True          # may the unfenced-write oracle judge this statement?
        tokened_stmt = False  # does the statement itself carry a token?
        writable = [c for c in cols if not c.generated and not c.identity and c.name not in table.key
                    and c.name != tok_col]
        with_tok = tok is not None and (mode == "explicit" or r.random() < 0.15)
        if op in ("insert", "upsert"):
            nrows = r.choice([1, 1, 1, 2, 3])
            names = [c.name for c in key] + [c.name for c in writable if c.notnull or r.random() < 0.6]
            if r.random() < 0.05:
                names += [c.name for c in cols if c.generated or c.identity][:1]
            if with_tok and tok_col not in names:
                names.append(tok_col)
            elif with_tok:
                with_tok = False
                judge = False
            rows, presented = [], []
            for _ in range(nrows):
                keyvals = self.pick_key(table)[0] if table.key else {}
                vals = []
                for n in names:
                    c = rel.col(n)
                    if n == tok_col:
                        t = self.pick_token(table)
                        v = r.choice([str(t) if t is not None else "NULL"] * 5 + ["0", "NULL", "DEFAULT"])
                        presented.append(v)
                        vals.append(v)
                    elif n in keyvals:
                        vals.append(self.sql_value(keyvals[n], c))
                    else:
                        vals.append(self.sql_value(self.value(c, bad=0.04, null=0.04 if not c.notnull else 0.01), c))
                rows.append("(" + ", ".join(vals) + ")")
            if not names:
                sql = "INSERT INTO %s DEFAULT VALUES" % rel.qname
            else:
                sql = "INSERT INTO %s (%s) VALUES %s" % (rel.qname, ", ".join(qi(n) for n in names), ", ".join(rows))
            if op == "upsert" and key:
                conflict = "(%s)" % ", ".join(qi(c.name) for c in key)
                if r.random() < 0.3 or not writable:
                    sql += " ON CONFLICT %s DO NOTHING" % conflict
                else:
                    sets = ["%s = EXCLUDED.%s" % (qi(c.name), qi(c.name)) for c in r.sample(writable, 1)]
                    if with_tok and r.random() < 0.5:
                        sets.append("%s = EXCLUDED.%s" % (qi(tok_col), qi(tok_col)))
                    sql += " ON CONFLICT %s DO UPDATE SET %s" % (conflict, ", ".join(sets))
            if with_tok:
                if "DEFAULT" in presented:
                    judge = False
                tokened_stmt = all(v not in ("0", "NULL", "DEFAULT") for v in presented)
            elif tok is not None and not tok.zero_default():
                judge = False  # the column's default (42, an identity ...) is a token
        elif op == "update":
            sets = []
            for c in r.sample(writable, min(len(writable), r.randint(0, 2))):
                sets.append("%s = %s" % (qi(c.name), self.sql_value(self.value(c), c)))
            if with_tok:
                t = self.pick_token(table)
                sets.append("%s = %s" % (qi(tok_col), r.choice([str(t) if t is not None else "NULL"] * 4 +
                                                                ["NULL", "0"] + (["%s + 1" % qi(tok_col)]
                                                                                 if tok.fmt == "bigint" else []))))
                tokened_stmt = True
            if key and r.random() < 0.1:
                kc = r.choice(key)
                sets.append("%s = %s" % (qi(kc.name), self.sql_value(self.value(kc, bad=0.02, null=0.0), kc)))
            if not sets:
                some = writable[0] if writable else (key[0] if key else None)
                if some is None:
                    return
                sets.append("%s = %s" % (qi(some.name), qi(some.name)))
            sql = "UPDATE %s SET %s%s" % (rel.qname, ", ".join(sets), self.where(table, key))
        elif op == "delete":
            sql = "DELETE FROM %s%s" % (rel.qname, self.where(table, key))
        elif op == "merge" and key and rel.is_table():
            keyvals = self.pick_key(table)[0]
            src = [self.sql_value(keyvals[c.name], c) for c in key]
            names = ["s%d" % i for i in range(len(key))]
            on = " AND ".join("t.%s = s.%s" % (qi(c.name), n) for c, n in zip(key, names))
            set_part = ", ".join("%s = %s" % (qi(c.name), self.sql_value(self.value(c), c)) for c in writable[:1])
            ins_cols = [qi(c.name) for c in key]
            ins_vals = ["s.%s" % n for n in names]
            if with_tok and tok_col in table.key:
                judge = False
            elif with_tok:
                t = self.pick_token(table)
                v = str(t) if t is not None else "NULL"
                set_part = (set_part + ", " if set_part else "") + "%s = %s" % (qi(tok_col), v)
                ins_cols.append(qi(tok_col))
                ins_vals.append(v)
                tokened_stmt = v not in ("NULL", "0")
            elif tok is not None and not tok.zero_default():
                judge = False
            if not set_part:
                set_part = "%s = t.%s" % (qi(key[0].name), qi(key[0].name))
            sql = ("MERGE INTO %s AS t USING (VALUES (%s)) AS s(%s) ON %s WHEN MATCHED THEN UPDATE SET %s "
                   "WHEN NOT MATCHED THEN INSERT (%s) VALUES (%s)"
                   % (rel.qname, ", ".join(src), ", ".join(names), on, set_part, ", ".join(ins_cols),
                      ", ".join(ins_vals)))
        else:
            op = "truncate"
            sql = "TRUNCATE %s" % rel.qname
        # where the token comes from
        token_lit = self.token_text(table) if mode not in ("none", "explicit") else None
        set_stmt = None
        if mode == "set_local":
            set_stmt = "SET LOCAL fencing.token = %s" % token_lit
        elif mode == "set_config":
            set_stmt = "SELECT set_config('fencing.token', %s, true)" % (
                token_lit if token_lit.startswith("'") else ql(token_lit))
        elif mode in ("set_in_tx", "session"):
            set_stmt = "SET fencing.token = %s" % token_lit
        if mode == "session":
            stmts = [set_stmt, sql]  # a value set by an earlier transaction never counts
        elif set_stmt is not None:
            stmts = ["BEGIN", set_stmt, sql, "COMMIT"]
        else:
            stmts = [sql]
        tokened = tokened_stmt or (mode in ("set_local", "set_config", "set_in_tx")
                                   and self.valid_token_text(token_lit))
        case.meta["op"] = op
        if getattr(table, "fixed", False):
            case.extra |= FIXED_EXTRA
        if self.family_handmade(table):
            case.extra.add("39P01")  # the write reaches a partition with a hand-made guard trigger
        guarded = judge and rel.kind != "v" and table.guarded and not table.has_handmade() and not table.rules
        self.with_role(case, stmts)
        loaded = self.module_loaded()
        err, rows, rowcount = self.run_case(case)
        if not self.alive():
            return
        done = case.meta.get("done", [])
        if set_stmt is not None and loaded and token_lit != "''" and not self.valid_token_text(token_lit) and \
                case.stmts.index(set_stmt) in done:
            self.fail(case, None, "SET fencing.token accepted the invalid value %s" % token_lit)
        if mode == "session" and case.stmts.index(set_stmt) in done:
            self.session_log.append(set_stmt)
        if err is None:
            if guarded and (rowcount > 0 or op == "truncate") and not tokened:
                self.fail(case, None, "a write to protected table %s without any token was accepted (%s, %s rows)"
                          % (table.qname, op, rowcount))
            self.refresh_family(table, case)
            self.log_success(case, rel)

    def module_loaded(self):
        try:
            return self.q("SELECT count(*) FROM pg_settings WHERE name = 'fencing.token'")[0][0] > 0
        except psycopg.Error:
            if not self.alive():
                raise
            return False

    def where(self, table, key):
        r = self.r
        c = r.random()
        if key and c < 0.7:
            keyvals, _ = self.pick_key(table)
            return " WHERE " + " AND ".join("%s = %s" % (qi(k.name), self.sql_value(keyvals.get(k.name), k))
                                            for k in key if k.name in keyvals)
        if c < 0.85:
            return ""
        return r.choice([" WHERE false", " WHERE random() < 2", " WHERE ctid = '(0,1)'"])

    # -- DDL ------------------------------------------------------------------------

    def ddl_case(self, stmts, rel=None):
        case = Case("ddl", stmts, rel, None)
        err, _, _ = self.run_case(case)
        return case, err

    def new_name(self, unique):
        """A table name: odd, and unique among ours when `unique`."""
        self.table_seq += 1
        r = self.r
        base = ident(r, []) if r.random() < 0.8 else "t"
        if base.lower() in TYPE_NAMES:
            base = "t_" + base
        if not unique and r.random() < 0.5:
            return base
        suffix = "_%d" % self.table_seq
        while len((base + suffix).encode()) > 63:
            base = base[:-1]
        return base + suffix

    def gen_create(self):
        r = self.r
        if len(self.tables()) >= MAX_TABLES:
            self.gen_drop()
        schema = r.choice(["public", "fz", "fz", '"Odd ""schema"" ü"', "temp"])
        taken = [x.qname for x in self.rels]
        prefix = "pg_temp." if schema == "temp" else schema + "."
        qname = prefix + qi(self.new_name(False))
        if qname in taken:
            qname = prefix + qi(self.new_name(True))
        part = r.random() < 0.15
        persistence = "TEMP " if schema == "temp" else ("UNLOGGED " if r.random() < 0.1 and not part else "")
        taken_cols = []
        keyable = [t for t in self.types if t.key and (t.part or not part)]
        weights = [t.weight for t in keyable]
        nkey = r.choice([1, 1, 1, 1, 2, 2, 3, 4])
        key_cols = []
        for i in range(nkey):
            t = r.choices(keyable, weights)[0]
            key_cols.append((ident(r, taken_cols), t))
        other = []
        for i in range(r.randint(0, 4)):
            t = r.choices(self.types, [x.weight for x in self.types])[0]
            other.append((ident(r, taken_cols), t))
        defs = []
        for n, t in key_cols:
            defs.append("%s %s" % (qi(n), t.ddl))
        for n, t in other:
            d = "%s %s" % (qi(n), t.ddl)
            if r.random() < 0.2:
                d += " NOT NULL"
            if r.random() < 0.1:
                d += " CHECK (NOT ((%s)::text LIKE '%%!%%'))" % qi(n)
            defs.append(d)
        tok = r.random()
        tok_in_key = False
        if tok < 0.2:
            pass
        elif tok < 0.85:
            defs.append("last_fencing_token bigint NOT NULL DEFAULT 0")
        else:
            variants = ["last_fencing_token text", "last_fencing_token int4 DEFAULT 0",
                        "last_fencing_token numeric", "last_fencing_token bigint",
                        "last_fencing_token bigint GENERATED ALWAYS AS (7) STORED",
                        "last_fencing_token bigint GENERATED BY DEFAULT AS IDENTITY",
                        "last_fencing_token bigint DEFAULT 42", "epoch bigint NOT NULL DEFAULT 0",
                        "last_fencing_token bigint NOT NULL DEFAULT 0 CHECK (last_fencing_token < 1000000)",
                        "key_token"]
            v = r.choice(variants if not part else variants[:4])
            if v == "key_token":
                key_cols.append(("last_fencing_token", self.type_by_fmt["bigint"]))
                defs.append("last_fencing_token bigint")
                tok_in_key = True
            else:
                defs.append(v)
        if not part:
            if r.random() < 0.12:
                defs.append("%s int GENERATED ALWAYS AS (42) STORED" % qi(ident(r, taken_cols)))
            if r.random() < 0.08:
                defs.append("%s int GENERATED %s AS IDENTITY" % (qi(ident(r, taken_cols)),
                                                                 r.choice(["ALWAYS", "BY DEFAULT"])))
            if r.random() < 0.08:
                defs.append("%s int REFERENCES fz.nest_target (id)" % qi(ident(r, taken_cols)))
        drop_cols = []
        if r.random() < 0.3:
            n = ident(r, taken_cols)
            defs.insert(r.randint(0, len(defs)), "%s text" % qi(n))
            drop_cols.append(n)
        r.shuffle(defs)
        pk_cols = [n for n, _ in key_cols]
        r.shuffle(pk_cols)
        pk = r.random()
        if pk < 0.05 and not part:
            pass  # no primary key
        else:
            clause = "PRIMARY KEY (%s)" % ", ".join(qi(n) for n in pk_cols)
            if other and r.random() < 0.1:
                clause += " INCLUDE (%s)" % qi(r.choice(other)[0])
            if pk < 0.09 and not part:
                clause += r.choice([" DEFERRABLE", " DEFERRABLE INITIALLY DEFERRED", " NOT DEFERRABLE"])
            defs.append(clause)
        sql = "CREATE %sTABLE %s (%s)" % (persistence, qname, ", ".join(defs))
        pinfo = None
        if part:
            pcol, ptype = key_cols[0] if not tok_in_key else key_cols[0]
            method = r.choice(["LIST", "RANGE", "HASH"])
            sql += " PARTITION BY %s (%s)" % (method, qi(pcol))
            pinfo = (method, pcol, ptype)
        stmts = [sql]
        for n in drop_cols:
            stmts.append("ALTER TABLE %s DROP COLUMN %s" % (qname, qi(n)))
        if schema != "temp":
            stmts.append("GRANT SELECT ON %s TO %s" % (qname, READER))
            if r.random() < 0.8:
                stmts.append("GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON %s TO %s" % (qname, WRITER))
            else:
                upd = [qi(n) for n, _ in other][:1] or [qi(key_cols[0][0])]
                stmts.append("GRANT SELECT, INSERT, DELETE, UPDATE (%s) ON %s TO %s" % (", ".join(upd), qname, WRITER))
        else:
            stmts.append("GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s" % (qname, WRITER))
            stmts.append("GRANT SELECT ON %s TO %s" % (qname, READER))
        rel = Rel("p" if part else "r", qname)
        case, err = self.ddl_case(stmts, rel)
        if err is not None or not self.alive():
            if self.alive():
                try:
                    self.q("DROP TABLE IF EXISTS %s CASCADE" % qname)
                except psycopg.Error:
                    pass
            return
        rel.ddl = list(stmts)
        rel.oid = self.q("SELECT %s::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8" % ql(qname))[0][0]
        self.rels.append(rel)
        self.introspect(rel)
        if part:
            self.make_partitions(rel, pinfo)
        self.seed_rows(rel)
        self.decorate(rel)
        self.refresh(rel)

    def seed_rows(self, rel):
        """A few rows to aim at, written with a token (before or after protect())."""
        r = self.r
        if not rel.key or any(rel.col(k) is None for k in rel.key):
            return
        tok = self.token_column_of(rel)
        names = list(rel.key) + [c.name for c in rel.cols
                                 if c.name not in rel.key and c.name != tok and not c.generated and not c.identity
                                 and (c.notnull or r.random() < 0.5)]
        rows = []
        for _ in range(r.randint(2, 8)):
            vals = []
            for n in names:
                c = rel.col(n)
                vals.append(self.sql_value(self.value(c, bad=0.0, null=0.0 if (c.notnull or n in rel.key) else 0.1), c))
            rows.append("(%s)" % ", ".join(vals))
        sql = "INSERT INTO %s (%s) VALUES %s ON CONFLICT DO NOTHING" % (
            rel.qname, ", ".join(qi(n) for n in names), ", ".join(rows))
        case = Case("dml", ["BEGIN", "SET LOCAL fencing.token = %d" % r.randint(1, 3), sql, "COMMIT"], rel)
        if self.family_handmade(rel):
            case.extra.add("39P01")
        err, _, _ = self.run_case(case)
        if err is None:
            rel.ddl += case.stmts

    def make_partitions(self, rel, pinfo):
        r = self.r
        method, pcol, ptype = pinfo
        bounds = []
        if method == "HASH":
            bounds = ["FOR VALUES WITH (MODULUS 2, REMAINDER 0)", "FOR VALUES WITH (MODULUS 2, REMAINDER 1)"]
        elif method == "RANGE":
            mid = {"text": "'m'", "date": "'2000-01-01'"}.get(ptype.ddl, "5")
            bounds = ["FOR VALUES FROM (MINVALUE) TO (%s)" % mid, "FOR VALUES FROM (%s) TO (MAXVALUE)" % mid]
        else:
            vals = {"text": ["'a'", "'b'", "'c'", "''"], "date": ["'2024-01-01'", "'infinity'"]}.get(
                ptype.ddl, ["0", "1", "2", "3", "-1"])
            bounds = ["FOR VALUES IN (%s)" % ", ".join(vals)]
            if r.random() < 0.7:
                bounds.append("DEFAULT")
        schema = rel.qname.split(".")[0]
        for i, b in enumerate(bounds):
            pname = "%s.%s" % (schema, qi("part_%d_%d" % (self.table_seq, i)))
            if r.random() < 0.4 and not rel.temp:
                # Built apart with another column order and a dropped column, then attached.
                cols = [c for c in rel.cols]
                r.shuffle(cols)
                defs = ["%s %s%s" % (qi(c.name), c.fmt, " NOT NULL" if c.notnull else "") for c in cols]
                defs.insert(r.randint(0, len(defs)), "zz_dropped int")
                stmts = ["CREATE TABLE %s (%s)" % (pname, ", ".join(defs)),
                         "ALTER TABLE %s DROP COLUMN zz_dropped" % pname,
                         "ALTER TABLE %s ATTACH PARTITION %s %s" % (rel.qname, pname, b)]
            else:
                stmts = ["CREATE %sTABLE %s PARTITION OF %s %s" % ("TEMP " if rel.temp else "", pname,
                                                                   rel.qname, b)]
            stmts.append("GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s" % (pname, WRITER))
            case, err = self.ddl_case(stmts, rel)
            if err is not None or not self.alive():
                try:
                    self.q("DROP TABLE IF EXISTS %s" % pname)
                except psycopg.Error:
                    pass
                continue
            rel.ddl += stmts
            p = Rel("r", pname, base=rel)
            p.oid = self.q("SELECT %s::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8" % ql(pname))[0][0]
            self.rels.append(p)
            self.introspect(p)

    def decorate(self, rel):
        """Optional hostile extras: RLS, rules, triggers, views, a protect() call."""
        r = self.r
        stmts = []
        keyc = rel.key[0] if rel.key else (rel.cols[0].name if rel.cols else None)
        if keyc is not None and r.random() < 0.12:
            stmts += ["ALTER TABLE %s ENABLE ROW LEVEL SECURITY" % rel.qname,
                      "CREATE POLICY fz_sel ON %s FOR SELECT USING (%s)" % (
                          rel.qname, r.choice(["true", "md5((%s)::text) < '8'" % qi(keyc)])),
                      "CREATE POLICY fz_upd ON %s FOR UPDATE USING (md5((%s)::text) < '%s') WITH CHECK (%s)" % (
                          rel.qname, qi(keyc), r.choice(["8", "c", "0"]), r.choice(["true", "false"])),
                      "CREATE POLICY fz_ins ON %s FOR INSERT WITH CHECK (true)" % rel.qname,
                      "CREATE POLICY fz_del ON %s FOR DELETE USING (true)" % rel.qname]
            if r.random() < 0.3:
                stmts.append("ALTER TABLE %s FORCE ROW LEVEL SECURITY" % rel.qname)
        if rel.kind == "r" and r.random() < 0.08:
            stmts.append(r.choice([
                "CREATE RULE fz_rule AS ON UPDATE TO %s DO INSTEAD NOTHING",
                "CREATE RULE fz_rule AS ON UPDATE TO %s DO ALSO INSERT INTO fz.rule_log (what) VALUES ('u')",
                "CREATE RULE fz_rule AS ON UPDATE TO %s DO INSTEAD INSERT INTO fz.rule_log (what) VALUES ('u')",
                "CREATE RULE fz_rule AS ON DELETE TO %s DO INSTEAD NOTHING",
                "CREATE RULE fz_rule AS ON INSERT TO %s DO ALSO INSERT INTO fz.rule_log (what) VALUES ('i')",
            ]) % rel.qname)
        if r.random() < 0.1:
            stmts.append("CREATE TRIGGER zz_skip BEFORE UPDATE OR DELETE ON %s FOR EACH ROW "
                         "EXECUTE FUNCTION fz.trg_skip()" % rel.qname)
        if r.random() < 0.08:
            stmts.append("CREATE TRIGGER aa_nested BEFORE UPDATE ON %s FOR EACH ROW "
                         "EXECUTE FUNCTION fz.trg_nested()" % rel.qname)
        if rel.kind == "r" and r.random() < 0.05:
            stmts.append(self.handmade_guard(rel))
        if stmts:
            case, err = self.ddl_case(stmts, rel)
            if err is None:
                rel.ddl += stmts
                if any("fencing_guard" in s for s in stmts):
                    rel.handmade = True
            elif self.alive():
                done = case.meta.get("done", [])
                rel.ddl += [case.stmts[i] for i in done]
                if any("fencing_guard" in case.stmts[i] for i in done):
                    rel.handmade = True
        if r.random() < 0.15:
            self.make_dependent(rel)
        if r.random() < 0.65:
            args = [ql(rel.qname)]
            if r.random() < 0.3:
                args += ["'last_fencing_token'", r.choice(["'strict'", "'monotonic'"])]
            case = Case("protect", ["SELECT fencing.protect(%s)" % ", ".join(args)], rel)
            err, _, _ = self.run_case(case)
            if err is None:
                rel.ddl += case.stmts
                rel.handmade = False
        if self.alive():
            self.introspect_family(rel)

    def handmade_guard(self, rel):
        r = self.r
        args = r.choice(["", "'last_fencing_token'", "'last_fencing_token', 'bogus'", "'nope', 'monotonic'",
                         "'last_fencing_token', 'monotonic'", "'last_fencing_token', 'strict', 'extra'"])
        timing = r.choice(["BEFORE UPDATE", "BEFORE INSERT OR UPDATE OR DELETE", "AFTER DELETE",
                           "BEFORE DELETE"])
        level = r.choice(["FOR EACH ROW"] * 3 + ["FOR EACH STATEMENT"])
        return "CREATE TRIGGER fencing_guard %s ON %s %s EXECUTE FUNCTION fencing.guard(%s)" % (
            timing, rel.qname, level, args)

    def make_dependent(self, rel):
        r = self.r
        kind = r.choice(["v", "v", "m", "S", "i"])
        schema = "fz" if not rel.temp else "pg_temp"
        name = "%s.%s" % (schema, qi("%s_%d" % ({"v": "view", "m": "matview", "S": "seq", "i": "idx"}[kind],
                                                 self.table_seq)))
        if kind == "v":
            stmts = ["CREATE %sVIEW %s AS SELECT * FROM %s" % ("TEMP " if rel.temp else "", name, rel.qname),
                     "GRANT SELECT, INSERT, UPDATE, DELETE ON %s TO %s" % (name, WRITER)]
        elif kind == "m":
            if rel.temp:
                return
            stmts = ["CREATE MATERIALIZED VIEW %s AS SELECT * FROM %s" % (name, rel.qname)]
        elif kind == "S":
            stmts = ["CREATE %sSEQUENCE %s" % ("TEMP " if rel.temp else "", name)]
        else:
            if not rel.cols:
                return
            stmts = ["CREATE INDEX %s ON %s (%s)" % (qi("idx_%d" % self.table_seq), rel.qname, qi(rel.cols[0].name))]
            name = "%s.%s" % (rel.qname.split(".")[0], qi("idx_%d" % self.table_seq))
        case, err = self.ddl_case(stmts, rel)
        if err is None:
            x = Rel(kind, name, base=rel)
            x.ddl = list(stmts)
            try:
                x.oid = self.q("SELECT %s::pg_catalog.regclass::pg_catalog.oid::pg_catalog.int8" % ql(name))[0][0]
            except psycopg.Error:
                return
            self.rels.append(x)
            self.introspect(x)
            rel.log += stmts

    def gen_drop(self):
        r = self.r
        tables = [t for t in self.tables() if t.base is None and not getattr(t, "fixed", False)]
        if not tables:
            return
        broken = [t for t in tables if not t.key or not t.pk_immediate or self.token_column_of(t) is None]
        rel = r.choice(broken if broken and r.random() < 0.7 else tables)
        case, err = self.ddl_case(["DROP TABLE %s CASCADE" % rel.qname], rel)
        if self.alive():
            self.forget_missing()

    def gen_alter(self):
        r = self.r
        rel = self.pick_rel()
        if rel is None:
            return
        nonkey = [c for c in rel.cols if c.name not in rel.key]
        opts = ["add", "add", "add", "drop", "rename_col", "retype", "rls", "trigger", "rule", "rename", "dependent",
                "dependent", "token", "logged", "pk" if rel.key else "add", "pk"]
        if rel.kind == "p" or rel.base is not None:
            opts += ["detach", "attach"]
        what = r.choice(opts)
        t = rel.qname
        stmts = []
        taken = [c.name for c in rel.cols] + list(rel.dropped)
        if what == "add":
            typ = r.choices(self.types, [x.weight for x in self.types])[0]
            n = ident(r, taken)
            stmts = ["ALTER TABLE %s ADD COLUMN %s %s%s" % (t, qi(n), typ.ddl,
                                                             r.choice(["", "", " DEFAULT NULL", " NOT NULL DEFAULT %s"
                                                                       % self.sql_value(typ.gen(r), Col(n, typ.ddl, typ, False, False, False))]))]
        elif what == "drop" and rel.cols:
            c = r.choice(nonkey if nonkey and r.random() < 0.85 else rel.cols)
            stmts = ["ALTER TABLE %s DROP COLUMN %s%s" % (t, qi(c.name), r.choice(["", " CASCADE"]))]
        elif what == "rename_col" and rel.cols:
            c = r.choice(rel.cols)
            stmts = ["ALTER TABLE %s RENAME COLUMN %s TO %s" % (t, qi(c.name), qi(ident(r, taken)))]
        elif what == "retype" and nonkey:
            c = r.choice(nonkey)
            new = r.choice(["text", "bigint", "varchar(3)", "jsonb", "numeric(5,1)"])
            stmts = ["ALTER TABLE %s ALTER COLUMN %s TYPE %s USING %s" % (
                t, qi(c.name), new, r.choice(["NULL", "(%s)::text::%s" % (qi(c.name), new)]))]
        elif what == "rls":
            stmts = ["ALTER TABLE %s %s ROW LEVEL SECURITY" % (t, r.choice(["ENABLE", "DISABLE", "FORCE", "NO FORCE"]))]
        elif what == "trigger":
            stmts = [r.choice(["CREATE TRIGGER zz_skip BEFORE UPDATE OR DELETE ON %s FOR EACH ROW "
                               "EXECUTE FUNCTION fz.trg_skip()" % t,
                               "DROP TRIGGER IF EXISTS zz_skip ON %s" % t,
                               "CREATE TRIGGER aa_nested BEFORE UPDATE ON %s FOR EACH ROW "
                               "EXECUTE FUNCTION fz.trg_nested()" % t,
                               self.handmade_guard(rel),
                               "DROP TRIGGER IF EXISTS fencing_guard ON %s" % t,
                               "ALTER TABLE %s DISABLE TRIGGER zz_skip" % t])]
        elif what == "rule":
            stmts = [r.choice(["CREATE RULE fz_rule AS ON UPDATE TO %s DO INSTEAD NOTHING" % t,
                               "CREATE RULE fz_rule AS ON UPDATE TO %s DO INSTEAD INSERT INTO fz.rule_log (what) "
                               "VALUES ('u')" % t,
                               "DROP RULE IF EXISTS fz_rule ON %s" % t])]
        elif what == "rename":
            schema = t.split(".")[0]
            new = "%s.%s" % (schema, qi("renamed_%d" % (self.table_seq + self.step)))
            stmts = ["ALTER TABLE %s RENAME TO %s" % (t, qi("renamed_%d" % (self.table_seq + self.step)))]
            case, err = self.ddl_case(stmts, rel)
            if err is None:
                rel.logbook().log += stmts
                rel.qname = new
            self.after_ddl(rel)
            return
        elif what == "pk":
            if rel.key:
                stmts = ["ALTER TABLE %s DROP CONSTRAINT %s" % (t, qi(self.pk_name(rel)))]
            elif rel.cols:
                stmts = ["ALTER TABLE %s ADD PRIMARY KEY (%s)" % (t, qi(r.choice(rel.cols).name))]
        elif what == "dependent":
            self.make_dependent(rel)
            return
        elif what == "token":
            c = rel.col("last_fencing_token")
            if c is not None:
                stmts = [r.choice(["ALTER TABLE %s ALTER COLUMN last_fencing_token DROP NOT NULL" % t,
                                   "ALTER TABLE %s ALTER COLUMN last_fencing_token TYPE int4" % t,
                                   "ALTER TABLE %s DROP COLUMN last_fencing_token" % t,
                                   "ALTER TABLE %s RENAME COLUMN last_fencing_token TO tok_renamed" % t])]
        elif what == "logged" and rel.kind == "r" and not rel.temp:
            stmts = ["ALTER TABLE %s SET %s" % (t, r.choice(["LOGGED", "UNLOGGED"]))]
        elif what == "detach" and rel.base is not None and rel.base.kind == "p":
            stmts = ["ALTER TABLE %s DETACH PARTITION %s" % (rel.base.qname, t)]
            case, err = self.ddl_case(stmts, rel)
            if err is None:
                rel.logbook().log += stmts
                parent = rel.base
                rel.base = None
                rel.ddl = ["-- (detached from %s)" % parent.qname] + parent.ddl
                rel.log = list(parent.log)
                rel.detached_from = parent
            self.after_ddl(rel)
            return
        elif what == "attach":
            cand = [x for x in self.tables() if getattr(x, "detached_from", None) is not None and x.base is None]
            if cand and rel.kind == "p":
                x = r.choice(cand)
                stmts = ["ALTER TABLE %s ATTACH PARTITION %s DEFAULT" % (t, x.qname)]
                case, err = self.ddl_case(stmts, rel)
                if err is None:
                    rel.logbook().log += stmts
                    x.base = rel
                self.after_ddl(rel)
                return
        if not stmts:
            return
        case, err = self.ddl_case(stmts, rel)
        if err is None:
            rel.logbook().log += stmts
            if "fencing_guard" in stmts[0] and "DROP" not in stmts[0]:
                rel.handmade = True
        self.after_ddl(rel)

    def pk_name(self, rel):
        rows = self.q("SELECT conname FROM pg_constraint WHERE conrelid = %d AND contype = 'p'" % rel.oid)
        return rows[0][0] if rows else "none"

    def after_ddl(self, rel):
        if not self.alive():
            return
        self.forget_missing()
        if rel in self.rels:
            rel.model = None
            rel.model_sig = None
            self.introspect_family(rel)
            for x in self.rels:
                if x is rel or x.base is rel or rel.base is x:
                    x.model = None
                    x.model_sig = None
            self.refresh_family(rel, None)

    def gen_session(self):
        """Session settings that must not change which key a mark belongs to (docs/design.md)."""
        r = self.r
        setting = r.choice([
            "DateStyle = %s" % r.choice(["'ISO, DMY'", "'SQL, MDY'", "'SQL, DMY'", "'German'", "'Postgres, YMD'",
                                         "'ISO, YMD'"]),
            "TimeZone = %s" % r.choice(["'UTC'", "'Asia/Kathmandu'", "'America/St_Johns'", "'+14'", "'PST8PDT'",
                                        "'Europe/Berlin'"]),
            "IntervalStyle = %s" % r.choice(["'iso_8601'", "'sql_standard'", "'postgres_verbose'", "'postgres'"]),
            "extra_float_digits = %d" % r.randint(-15, 3),
            "bytea_output = %s" % r.choice(["'escape'", "'hex'"]),
            "search_path = %s" % r.choice(['fz, public', '"Odd ""schema"" ü", public', "public",
                                           "pg_temp, public", "fencing, public", '"$user", public']),
        ])
        stmt = "SET %s" % setting
        case = Case("set", [stmt])
        err, _, _ = self.run_case(case)
        if err is None:
            self.session_log.append(stmt)

    def gen_reconnect(self):
        preload = self.r.random() < 0.7
        self.step += 1
        self.tally["reconnects"] = self.tally.get("reconnects", 0) + 1
        try:
            self.conn.close()
        except Exception:
            pass
        self.connect(preload=preload)
        self.forget_temp()
        self.forget_missing()

    # -- main loop ------------------------------------------------------------------------

    def one(self):
        r = self.r
        if len(self.tables()) < 3:
            self.gen_create()
            return
        x = r.random()
        if x < 0.45:
            self.gen_fenced_update()
        elif x < 0.67:
            self.gen_dml()
        elif x < 0.77:
            self.gen_protect()
        elif x < 0.79:
            self.gen_unprotect()
        elif x < 0.85:
            self.gen_create()
        elif x < 0.87:
            self.gen_drop()
        elif x < 0.95:
            self.gen_alter()
        elif x < 0.98:
            self.gen_helper()
        elif x < 0.995:
            self.gen_session()
        else:
            self.gen_reconnect()

    def run(self):
        self.create_database()
        ok = False
        try:
            self.connect(preload=False)
            self.prepare()
            self.start_time = time.time()
            deadline = self.start_time + self.args.seconds
            harness_errors = 0
            while time.time() < deadline and (self.args.steps is None or self.step < self.args.steps):
                try:
                    self.one()
                except (KeyError, IndexError, ValueError, TypeError, AttributeError) as e:
                    # A bug of this script: report it (the run fails), keep fuzzing.
                    harness_errors += 1
                    self.failures.append((self.step, "harness", None, "harness exception: %r" % e, ""))
                    if harness_errors <= 3:
                        print("fuzz: harness exception at step %d:" % self.step, flush=True)
                        traceback.print_exc(file=sys.stdout)
                    if self.alive():
                        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                            self.conn.execute("ROLLBACK")
                        self.conn.execute("RESET ROLE")
                except psycopg.Error as e:
                    if self.alive():
                        # A harness query failed: report it as such, keep going.
                        self.failures.append((self.step, "harness", getattr(e, "sqlstate", None), str(e), ""))
                        print("fuzz: harness query failed at step %d: %s" % (self.step, e), flush=True)
                        if self.conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                            self.conn.execute("ROLLBACK")
                        self.conn.execute("RESET ROLE")
                    else:
                        self.failures.append((self.step, "crash", None, "connection lost in a harness query", str(e)))
                        print("fuzz: connection lost at step %d (after the case above): %s" % (self.step, e),
                              flush=True)
                        self.count(Case("harness", []), "CRASH")
                        self.recover()
            ok = True
        finally:
            elapsed = time.time() - (self.start_time or time.time())
            try:
                with self.admin() as a:
                    now = a.execute("SELECT pg_postmaster_start_time()").fetchone()[0]
                if now != self.postmaster_start:
                    self.failures.append((self.step, "crash", None, "the server restarted during the run", ""))
                    print("fuzz: the server restarted during the run (postmaster start time changed)", flush=True)
            except Exception as e:
                self.failures.append((self.step, "crash", None, "server unreachable at the end: %s" % e, ""))
            try:
                self.drop_database()
            except Exception as e:
                print("fuzz: could not drop database %s: %s" % (DB, e), flush=True)
        self.summary(elapsed)
        return ok and not self.failures

    def summary(self, elapsed):
        kinds = sorted({k for k, _ in self.kind_counts})
        print("fuzz: %d cases in %.1f s (seed %d)" % (self.step, elapsed, self.seed), flush=True)
        print("fuzz: outcomes per SQLSTATE (00000 = success)")
        header = "  %-9s %7s  " % ("SQLSTATE", "total") + " ".join("%13s" % k for k in kinds)
        print(header)
        for code in sorted(self.counts):
            print("  %-9s %7d  " % (code, self.counts[code]) +
                  " ".join("%13s" % (self.kind_counts.get((k, code), "")) for k in kinds))
        if self.tally:
            print("fuzz: " + ", ".join("%s %d" % (k, v) for k, v in sorted(self.tally.items())))
        if self.failures:
            print("fuzz: %d failing cases (%d distinct):" % (len(self.failures), len(self.failure_sigs)))
            for sig, n in sorted(self.failure_sigs.items(), key=lambda x: -x[1]):
                print("  %5d x  %s  %s  %s  %s" % (n, sig[0], sig[1], sig[2], sig[3]))
            for f in self.failures:
                if f[1] in ("harness", "crash"):
                    print("  step %d: %s %s" % (f[0], f[1], f[3]))


def main():
    ap = argparse.ArgumentParser(description="fuzz fencing.fenced_update() and fencing.protect() inputs")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--steps", type=int, default=None, help="stop after this many cases")
    ap.add_argument("--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    if args.seed is None:
        args.seed = int.from_bytes(os.urandom(4), "big") % 1000000
    print("fuzz: seed %d" % args.seed, flush=True)
    if psycopg is None:
        print("fuzz: python3-psycopg (psycopg 3) is not installed (apt-get install python3-psycopg)", flush=True)
        print("test fuzz_inputs ... FAILED", flush=True)
        sys.exit(1)
    f = Fuzzer(args)
    try:
        ok = f.run()
    except Exception:
        traceback.print_exc()
        ok = False
    print("test fuzz_inputs ... %s" % ("ok" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
