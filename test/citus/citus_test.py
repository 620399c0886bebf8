#!/usr/bin/python3
"""
fencing on Citus: the guard on hash-distributed tables, through the
coordinator of a running Citus cluster (PG* variables point at it; the
workers' ports are in WORKER1_PORT and WORKER2_PORT, empty on a single
node; CITUS_TOPOLOGY says which of test/citus/lib.sh's topologies runs:
"workers", "coordinator" (holding shards beside the workers) or "single").
Each test prints "test <CITUS_PREFIX><name> ... ok|FAILED" (the prefix
"citus_" unless set) and, when it fails, why.  Exits 1 if any failed.  Run
by test/citus/run.
"""
import os
import sys
import threading
import time
import traceback

import psycopg
from psycopg import errors

TOPOLOGY = os.environ.get("CITUS_TOPOLOGY", "workers")
PREFIX = os.environ.get("CITUS_PREFIX", "citus_")
COORD = int(os.environ["COORD_PORT"])
WORKERS = [int(p) for p in (os.environ.get("WORKER1_PORT"), os.environ.get("WORKER2_PORT")) if p]
W1 = WORKERS[0] if WORKERS else None  # a worker, for the tests that need one
NODES = [COORD] + WORKERS
# The nodes that hold shards (in port order, as the metadata lists them).
SHARD_NODES = sorted(WORKERS + ([] if TOPOLOGY == "workers" else [COORD]))


def connect(autocommit=True, port=None):
    kw = {"autocommit": autocommit}
    if port is not None:
        kw["port"] = port
    return psycopg.connect(**kw)


db = connect()


def q(sql, params=None, conn=None):
    """Runs one statement; returns all rows (or None)."""
    cur = (conn or db).execute(sql, params)
    return cur.fetchall() if cur.description else None


def one(sql, params=None, conn=None):
    rows = q(sql, params, conn)
    return rows[0][0] if rows else None


def expect_error(sqlstate, sql, params=None, conn=None, contains=None, absent=None):
    """Runs sql (in its own transaction unless conn is in one); it must fail
    with sqlstate (or one of a tuple of them)."""
    try:
        q(sql, params, conn)
    except psycopg.Error as e:
        if e.sqlstate not in (sqlstate if isinstance(sqlstate, tuple) else (sqlstate,)):
            raise AssertionError(f"{sql!r}: expected {sqlstate}, got {e.sqlstate}: {e}")
        text = str(e) + " " + (e.diag.message_detail or "")
        for c in contains or []:
            if c not in text:
                raise AssertionError(f"{sql!r}: error does not mention {c!r}: {text}")
        for a in absent or []:
            if a in text:
                raise AssertionError(f"{sql!r}: error mentions {a!r}: {text}")
        return e
    raise AssertionError(f"{sql!r}: expected {sqlstate}, but it succeeded")


def in_tx(token, *statements, setter="SET LOCAL"):
    """Runs statements in one transaction that presents `token`; returns the last result."""
    with connect(autocommit=False) as c:
        if token is not None:
            if setter == "SET LOCAL":
                c.execute(f"SET LOCAL fencing.token = {int(token)}")
            else:
                c.execute("SELECT set_config('fencing.token', %s, true)", (str(token),))
        result = None
        for s in statements:
            cur = c.execute(s)
            result = cur.fetchall() if cur.description else cur.rowcount
        c.commit()
        return result


def tx_error(sqlstate, token, *statements, contains=None, absent=None):
    """Like in_tx, but the last statement must fail with sqlstate (and all is rolled back)."""
    with connect(autocommit=False) as c:
        if token is not None:
            c.execute(f"SET LOCAL fencing.token = {int(token)}")
        for s in statements[:-1]:
            c.execute(s)
        e = expect_error(sqlstate, statements[-1], conn=c, contains=contains, absent=absent)
        c.rollback()
        return e


def distributed(name, rows=20, mode="monotonic", ddl=None):
    """A fresh protected hash-distributed table name(id int PK, v text), rows 1..rows at token 1."""
    q(f"DROP TABLE IF EXISTS {name}")
    q(ddl or f"CREATE TABLE {name} (id int PRIMARY KEY, v text)")
    q(f"SELECT create_distributed_table('{name}', 'id')")
    q(f"SELECT fencing.protect('{name}', mode => '{mode}')")
    if rows:
        q(f"INSERT INTO {name} SELECT g, 'new', 1 FROM generate_series(1, {rows}) g")


def token_of(table, key):
    return one(f"SELECT last_fencing_token FROM {table} WHERE id = %s", (key,))


def node_of(table, key):
    return one("SELECT nodeport FROM pg_dist_shard_placement WHERE shardid ="
               " get_shard_id_for_distribution_column(%s, %s)", (table, key))


def shard_of(table, key):
    return one("SELECT get_shard_id_for_distribution_column(%s, %s)", (table, key))


def move(shard, mode="auto", dst=None):
    """Moves a shard (and its co-located ones) to dst, by default the next node that holds shards."""
    src = one("SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = %s", (shard,))
    dst = dst or SHARD_NODES[(SHARD_NODES.index(src) + 1) % len(SHARD_NODES)]
    q("SELECT citus_move_shard_placement(%s, '127.0.0.1', %s, '127.0.0.1', %s,"
      " shard_transfer_mode => %s)", (shard, src, dst, mode))
    assert one("SELECT nodeport FROM pg_dist_shard_placement WHERE shardid = %s", (shard,)) == dst


# --------------------------------------------------------------------------
TESTS = []


def test(fn=None, *, nodes=1, first=False):
    """A test; nodes=2: it needs a second node (not run on a single node);
    first: it runs before the others, on a cluster where no table was protected yet."""
    def register(f):
        f.nodes_needed = nodes
        f.first = first
        TESTS.append(f)
        return f
    return register(fn) if fn is not None else register


def split_nodes():
    """The node ids a split puts its two halves on: two nodes that hold shards, or the only one twice."""
    ids = [r[0] for r in q("SELECT nodeid FROM pg_dist_node WHERE noderole = 'primary'"
                           " AND nodeport = ANY(%s) ORDER BY nodeport", (SHARD_NODES,))]
    return (ids * 2)[:2]


@test
def protect_without_settings():
    """protect() on a distributed table changes no Citus setting; the guard reaches the shards."""
    distributed("orders", rows=4)
    assert one("SHOW citus.enable_unsafe_triggers") == "off"
    assert one("SHOW citus.propagate_set_commands") == "none"
    shards = one("SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'orders'::regclass")
    with_guard = sum(one("SELECT count(*) FROM pg_trigger WHERE tgname LIKE 'fencing_guard_%%'"
                         " AND tgrelid::regclass::text LIKE 'orders_%%'",
                         conn=connect(port=p)) for p in SHARD_NODES)
    assert with_guard == 3 * shards, (with_guard, shards)  # BEFORE and the two AFTER row triggers
    oid = one("SELECT 'orders'::regclass::oid")
    marks = f"fencing_citus.marks_{oid}"
    assert one("SELECT count(DISTINCT colocationid) FROM pg_dist_partition"
               " WHERE logicalrelid IN ('orders'::regclass, %s::regclass)", (marks,)) == 1
    assert one("SELECT relation::text FROM fencing.protected_tables WHERE relation = 'orders'::regclass") == "orders"


@test
def bad_inputs():
    distributed("orders", rows=3)
    e = tx_error("23T02", None, "UPDATE orders SET v = 'x' WHERE id = 1",
                 contains=['relation "orders"', "Relation public.orders, key (id)=(1)"], absent=["orders_1"])
    in_tx(5, "UPDATE orders SET v = 'x' WHERE id = 1")
    tx_error("23T01", 4, "UPDATE orders SET v = 'y' WHERE id = 1",
             contains=['stale fencing token 4 for relation "orders"', "stored token 5"], absent=["orders_1"])
    tx_error("23T01", 4, "DELETE FROM orders WHERE id = 1", absent=["orders_1"])
    tx_error("22023", None, "SET LOCAL fencing.token = 0")
    tx_error("22023", None, "SET LOCAL fencing.token = 'abc'")
    expect_error("22004", "SELECT fencing.fenced_update('orders', '{\"id\": 1}', NULL, '{}')")
    expect_error("22023", "SELECT fencing.fenced_update('orders', '{\"id\": 1}', 0, '{}')")
    expect_error("22023", "SELECT fencing.fenced_update('orders', '{\"id\": 1}', 9, '{\"id\": 2}')")
    expect_error("P0002", "SELECT fencing.fenced_update('orders', '{\"id\": 99}', 9, '{}')")
    expect_error("23T01", "SELECT fencing.fenced_update('orders', '{\"id\": 1}', 4, '{\"v\": \"z\"}')",
                 contains=['relation "orders"'])
    assert one("SELECT v FROM orders WHERE id = 1") == "x" and token_of("orders", 1) == 5
    # Tables the guard does not support on Citus say so, and change nothing.
    q("DROP TABLE IF EXISTS ref, parted, appended")
    q("CREATE TABLE ref (id int PRIMARY KEY)")
    q("SELECT create_reference_table('ref')")
    expect_error("0A000", "SELECT fencing.protect('ref')", contains=["reference table"])
    q("CREATE TABLE parted (id int, r int, PRIMARY KEY (id, r)) PARTITION BY RANGE (r)")
    q("CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10)")
    q("SELECT create_distributed_table('parted', 'id')")
    expect_error("0A000", "SELECT fencing.protect('parted')", contains=["partitioned"])
    for t in ("ref", "parted"):
        assert one(f"SELECT count(*) FROM pg_attribute WHERE attrelid = '{t}'::regclass"
                   " AND attname = 'last_fencing_token'") == 0, t
        assert one(f"SELECT count(*) FROM pg_trigger WHERE tgrelid = '{t}'::regclass"
                   " AND tgname LIKE 'fencing%%'") == 0, t
    q("DROP TABLE IF EXISTS nokey")
    q("CREATE TABLE nokey (id int, v text)")
    q("SELECT create_distributed_table('nokey', 'id', colocate_with => 'none')")
    expect_error("55000", "SELECT fencing.protect('nokey')")
    # A local table on the coordinator, and a Citus local table, are guarded as on one server.
    q("DROP TABLE IF EXISTS loc, cl")
    q("CREATE TABLE loc (id int PRIMARY KEY)")
    q("SELECT fencing.protect('loc')")
    in_tx(3, "INSERT INTO loc VALUES (1)")
    tx_error("23T01", 2, "DELETE FROM loc WHERE id = 1")
    q("CREATE TABLE cl (id int PRIMARY KEY)")
    q("SELECT citus_add_local_table_to_metadata('cl')")
    q("SELECT fencing.protect('cl')")
    in_tx(3, "INSERT INTO cl VALUES (1)")
    tx_error("23T02", None, "INSERT INTO cl VALUES (2)")
    q("DROP TABLE ref, parted, nokey, loc, cl")


@test
def rollout_options_refused():
    """Report-only, max_token and a maintainer are refused on Citus tables (their shards'
    guards would not honour them); reset_token() too; nothing changes."""
    distributed("orders", rows=3)
    q("DROP TABLE IF EXISTS fresh")
    q("CREATE TABLE fresh (id int PRIMARY KEY, v text)")
    q("SELECT create_distributed_table('fresh', 'id')")
    expect_error("0A000", "SELECT fencing.protect('fresh', enforce => false)",
                 contains=['report-only mode (enforce => false) is not supported on Citus table "fresh"'])
    expect_error("0A000", "SELECT fencing.protect('fresh', max_token => 1000)", contains=["max_token"])
    assert one("SELECT count(*) FROM fencing.protected_tables WHERE relation = 'fresh'::regclass") == 0
    assert one("SELECT count(*) FROM pg_attribute WHERE attrelid = 'fresh'::regclass"
               " AND attname = 'last_fencing_token'") == 0
    expect_error("0A000", "SELECT fencing.protect('orders', enforce => false)")
    expect_error("0A000", "SELECT fencing.set_enforce('orders', false)", contains=["report-only"])
    expect_error("0A000", "SELECT fencing.set_maintainer('orders', current_user::regrole)",
                 contains=["a maintainer"])
    assert one("SELECT (enforce, max_token, maintainer) IS NOT DISTINCT FROM (true, NULL::bigint, NULL::regrole)"
               " FROM fencing.protected_tables WHERE relation = 'orders'::regclass")
    # The defaults are accepted, and the shards keep enforcing.
    q("SELECT fencing.set_enforce('orders', true)")
    q("SELECT fencing.set_maintainer('orders', NULL)")
    q("SELECT fencing.protect('orders', enforce => true, max_token => NULL)")
    tx_error("23T02", None, "UPDATE orders SET v = 'x' WHERE id = 1")
    # A Citus local table is refused the same way.
    q("DROP TABLE IF EXISTS cl")
    q("CREATE TABLE cl (id int PRIMARY KEY)")
    q("SELECT citus_add_local_table_to_metadata('cl')")
    expect_error("0A000", "SELECT fencing.protect('cl', enforce => false)")
    # reset_token(): the rows and marks are on the workers, whose guards refuse a lower token.
    in_tx(9223372036854775807, "UPDATE orders SET v = 'pinned' WHERE id = 2")
    expect_error("0A000", "SELECT fencing.reset_token('orders', '{\"id\": 2}', 5)",
                 contains=["Citus distributed table"])
    assert token_of("orders", 2) == 9223372036854775807
    q("DROP TABLE fresh, cl")


@test
def split_brain():
    """The split brain of docs/design.md on a distributed table, PostgreSQL leases on the coordinator."""
    q("DROP TABLE IF EXISTS accounts")
    q("CREATE TABLE accounts (id text PRIMARY KEY, status text)")
    q("SELECT create_distributed_table('accounts', 'id')")
    q("SELECT fencing.protect('accounts')")
    q("INSERT INTO accounts VALUES ('order:101', 'new', 1)")
    q("DELETE FROM fencing.resources WHERE resource = 'order:101'")
    a = one("SELECT fencing.acquire('order:101', 'worker-a', '1 s')")
    assert one("SELECT fencing.acquire('order:101', 'worker-b', '1 s')") is None
    time.sleep(1.2)  # A is paused past its TTL
    b = one("SELECT fencing.acquire('order:101', 'worker-b', '10 s')")
    assert b > a
    assert one("SELECT fencing.fenced_update('accounts', '{\"id\": \"order:101\"}', %s,"
               " '{\"status\": \"paid\"}')", (b,)) is True
    assert one("SELECT fencing.renew('order:101', 'worker-a', %s, '1 s')", (a,)) is False
    expect_error("23T01", "SELECT fencing.fenced_update('accounts', '{\"id\": \"order:101\"}', %s,"
                 " '{\"status\": \"cancelled\"}')", (a,), contains=['relation "accounts"'])
    tx_error("23T01", a, "UPDATE accounts SET status = 'cancelled' WHERE id = 'order:101'",
             contains=['relation "accounts"'], absent=["accounts_1"])
    assert q("SELECT status, last_fencing_token FROM accounts") == [("paid", b)]


@test
def token_paths():
    """Every way a write can carry its token, one shard or many, in multi-statement transactions."""
    distributed("orders", rows=20)
    in_tx(10, "UPDATE orders SET v = 'a' WHERE id = 1")                        # SET LOCAL, one shard
    in_tx(11, "UPDATE orders SET v = 'b' WHERE id = 2", setter="set_config")   # set_config
    in_tx(None, "UPDATE orders SET v = 'c', last_fencing_token = 12 WHERE id = 3")  # the column
    assert one("SELECT fencing.fenced_update('orders', '{\"id\": 4}', 13, '{\"v\": \"d\"}')")
    assert in_tx(20, "UPDATE orders SET v = 'all'") == 20                     # all shards
    with connect(autocommit=False) as c:                                       # several statements
        c.execute("SET LOCAL fencing.token = 21")
        c.execute("UPDATE orders SET v = 's1' WHERE id = 5")
        c.execute("UPDATE orders SET v = 's2' WHERE id BETWEEN 6 AND 15")
        c.execute("DELETE FROM orders WHERE id = 16")
        c.execute("INSERT INTO orders VALUES (16, 'back')")
        c.execute("SET LOCAL fencing.token = 22")                              # a new token mid-way
        c.execute("UPDATE orders SET v = 's3' WHERE id = 17")
        c.commit()
    assert [token_of("orders", k) for k in (5, 6, 15, 16, 17)] == [21, 21, 21, 21, 22]
    # A rolled-back savepoint takes its token along; the outer one holds again.
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL fencing.token = 30")
        c.execute("SAVEPOINT s")
        c.execute("SET LOCAL fencing.token = 3")
        expect_error("23T01", "UPDATE orders SET v = 'stale' WHERE id = 1", conn=c)
        c.execute("ROLLBACK TO SAVEPOINT s")
        c.execute("UPDATE orders SET v = 'outer' WHERE id = 1")
        c.commit()
    assert token_of("orders", 1) == 30
    # The token never outlives its transaction, on any node: the next one on
    # this connection (a pooled connection's next client) has none.
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL fencing.token = 31")
        c.execute("UPDATE orders SET v = 'x' WHERE id = 1")
        c.commit()
        expect_error("23T02", "UPDATE orders SET v = 'leak' WHERE id = 1", conn=c)
        c.rollback()
        expect_error("23T02", "UPDATE orders SET v = 'leak' WHERE id BETWEEN 1 AND 20", conn=c)
        c.rollback()
    # A DO block, and upserts.
    q("DO $$ BEGIN PERFORM set_config('fencing.token', '40', true);"
      " UPDATE orders SET v = 'do' WHERE id = 18; END $$")
    assert token_of("orders", 18) == 40
    in_tx(41, "INSERT INTO orders VALUES (19, 'up', 0) ON CONFLICT (id) DO UPDATE SET v = 'upserted'")
    assert q("SELECT v, last_fencing_token FROM orders WHERE id = 19") == [("upserted", 41)]
    tx_error("23T01", 39, "INSERT INTO orders VALUES (19, 'up') ON CONFLICT (id) DO UPDATE SET v = 'x'")


@test
def multi_shard_all_or_nothing():
    distributed("orders", rows=40)
    high = 39  # a key on some shard
    in_tx(100, f"UPDATE orders SET v = 'newer' WHERE id = {high}")
    before = q("SELECT id, v, last_fencing_token FROM orders ORDER BY id")
    nodes = {node_of("orders", k) for k in range(1, 41)}
    assert nodes == set(SHARD_NODES), nodes
    tx_error("23T01", 50, "UPDATE orders SET v = 'stale-wave'")
    tx_error("23T01", 50, "DELETE FROM orders")
    tx_error("23T01", 50, "UPDATE orders SET v = 'w' WHERE id = 1",
             "UPDATE orders SET v = 'w' WHERE id = 2", f"UPDATE orders SET v = 'w' WHERE id = {high}")
    assert q("SELECT id, v, last_fencing_token FROM orders ORDER BY id") == before
    assert in_tx(100, "UPDATE orders SET v = 'wave'") == 40


def delete_then_stale(table, keys, token):
    in_tx(token, f"DELETE FROM {table} WHERE id IN ({', '.join(map(str, keys))})")


def refused_reinsert(table, keys, stale, fresh):
    for k in keys:
        tx_error("23T01", stale, f"INSERT INTO {table} VALUES ({k}, 'zombie')",
                 contains=[f'relation "{table}"'])
    for k in keys:
        expect_error("23T01", f"SELECT fencing.fenced_update('{table}', '{{\"id\": {k}}}', {stale}, '{{}}')")
    in_tx(fresh, *[f"INSERT INTO {table} VALUES ({k}, 'fresh')" for k in keys])


@test(nodes=2)
def marks_move_with_shards():
    """A key deleted under t: after its shard moves (both transfer modes), no re-insert under t-1."""
    distributed("orders", rows=20)
    for mode, t in (("block_writes", 10), ("force_logical", 20), ("auto", 30)):
        delete_then_stale("orders", [3, 7], t)
        move(shard_of("orders", 3), mode)
        if shard_of("orders", 7) != shard_of("orders", 3):
            move(shard_of("orders", 7), mode)
        refused_reinsert("orders", [3, 7], t - 1, t)


@test(nodes=2)
def marks_survive_rebalance():
    distributed("orders", rows=40)
    keys = list(range(1, 41, 4))
    delete_then_stale("orders", keys, 50)
    # Everything onto the first node, then the rebalancer spreads the shards again.
    first = SHARD_NODES[0]
    for sid, port in q("SELECT s.shardid, p.nodeport FROM pg_dist_shard s JOIN pg_dist_shard_placement p"
                       " USING (shardid) WHERE s.logicalrelid = 'orders'::regclass"):
        if port != first:
            move(sid, "block_writes", dst=first)
    assert {node_of("orders", k) for k in range(1, 41)} == {first}
    q("SELECT citus_rebalance_start(shard_transfer_mode => 'block_writes')")
    q("SELECT citus_rebalance_wait()")
    spread = {node_of("orders", k) for k in range(1, 41)}
    assert len(spread) > 1 and spread <= set(SHARD_NODES), spread
    refused_reinsert("orders", keys, 49, 50)


@test
def marks_survive_split():
    distributed("orders", rows=40)
    sid = shard_of("orders", 1)
    lo, hi = q("SELECT shardminvalue::bigint, shardmaxvalue::bigint FROM pg_dist_shard WHERE shardid = %s",
               (sid,))[0]
    mid = (lo + hi) // 2
    in_shard = [k for k in range(1, 41) if shard_of("orders", k) == sid]
    delete_then_stale("orders", in_shard, 60)
    nodes = split_nodes()
    q("SELECT citus_split_shard_by_split_points(%s, ARRAY[%s], ARRAY[%s, %s]::int[],"
      " shard_transfer_mode => 'block_writes')", (sid, str(mid), nodes[0], nodes[1]))
    halves = {shard_of("orders", k) for k in in_shard}
    assert sid not in halves and len(halves) == 2, halves
    refused_reinsert("orders", in_shard, 59, 60)


@test
def truncate():
    distributed("orders", rows=20)
    in_tx(70, "UPDATE orders SET v = 'x' WHERE id = 5")
    tx_error("23T02", None, "TRUNCATE orders", contains=['relation "orders"'])
    tx_error("23T01", 69, "TRUNCATE orders", contains=["stored token 70"])
    assert one("SELECT count(*) FROM orders") == 20
    in_tx(70, "TRUNCATE orders")
    assert one("SELECT count(*) FROM orders") == 0
    # The floor holds for keys never seen, on every shard, also after moves and a split.
    tx_error("23T01", 69, "INSERT INTO orders VALUES (1000, 'never seen')")
    if len(SHARD_NODES) > 1:
        move(shard_of("orders", 1000))
    sid = shard_of("orders", 2000)
    lo, hi = q("SELECT shardminvalue::bigint, shardmaxvalue::bigint FROM pg_dist_shard WHERE shardid = %s",
               (sid,))[0]
    nodes = split_nodes()
    q("SELECT citus_split_shard_by_split_points(%s, ARRAY[%s], ARRAY[%s, %s]::int[],"
      " shard_transfer_mode => 'block_writes')", (sid, str((lo + hi) // 2), nodes[0], nodes[1]))
    for k in range(1000, 1040):
        tx_error("23T01", 69, f"INSERT INTO orders VALUES ({k}, 'stale')")
    expect_error("23T01", "SELECT fencing.fenced_update('orders', '{\"id\": 1000}', 69, '{}')")
    in_tx(70, "INSERT INTO orders SELECT g, 'fresh' FROM generate_series(1000, 1039) g")
    assert one("SELECT fencing.high_water_mark()") >= 70


@test
def unprotect_and_drop():
    distributed("orders", rows=5)
    oid = one("SELECT 'orders'::regclass::oid")
    in_tx(10, "DELETE FROM orders WHERE id = 1")
    q("SELECT fencing.unprotect('orders')")
    assert one("SHOW citus.enable_unsafe_triggers") == "off"
    q("UPDATE orders SET v = 'free' WHERE id = 2")  # unguarded now
    assert one(f"SELECT count(*) FROM fencing_citus.marks_{oid}") == 1  # marks stay
    q("SELECT fencing.protect('orders')")
    tx_error("23T01", 9, "INSERT INTO orders VALUES (1, 'zombie')")
    in_tx(10, "TRUNCATE orders")
    q("DROP TABLE orders")
    assert one(f"SELECT to_regclass('fencing_citus.marks_{oid}')") is None
    assert one("SELECT count(*) FROM fencing_citus.floors WHERE id = %s", (oid,)) == 0
    assert relations_named(f"marks\\_{oid}%") == [], relations_named(f"marks\\_{oid}%")
    # DROP SCHEMA ... CASCADE takes the marks tables of the tables in it along.
    q("DROP SCHEMA IF EXISTS app CASCADE")
    q("CREATE SCHEMA app")
    distributed("app.orders", rows=5)
    oid = one("SELECT 'app.orders'::regclass::oid")
    if len(SHARD_NODES) > 1:
        move(shard_of("app.orders", 1))  # a shard dropped on a node is not a table's
    in_tx(10, "DELETE FROM app.orders WHERE id = 1")
    assert one(f"SELECT count(*) FROM fencing_citus.marks_{oid}") == 1
    q("DROP SCHEMA app CASCADE")
    assert one(f"SELECT to_regclass('fencing_citus.marks_{oid}')") is None
    q("CALL citus_cleanup_orphaned_resources()")  # the placements a move left behind
    assert relations_named(f"marks\\_{oid}%") == [], relations_named(f"marks\\_{oid}%")


def relations_named(pattern):
    """(port, name) of every relation whose name is LIKE pattern, on every node, shards included."""
    found = []
    for port in NODES:
        with connect(port=port) as c:
            c.execute("SET citus.show_shards_for_app_name_prefixes = '*'")
            found += [(port, r[0]) for r in
                      q("SELECT relname::text FROM pg_class WHERE relname LIKE %s ORDER BY 1", (pattern,), conn=c)]
    return found


LOCALLY = "locally: "


def remote_commands(sql, params=None, conn=None):
    """Runs sql with citus.log_remote_commands and citus.log_local_commands
    on; returns (result rows or the error, the commands the coordinator sent
    to workers and those it ran on its own shards, these as "locally: ...")."""
    c = conn or connect()
    sent = []

    def notice(diag):
        message = diag.message_primary or ""
        if message.startswith("issuing "):
            sent.append(message[len("issuing "):])
        elif message.startswith("executing the command locally: "):
            sent.append(LOCALLY + message[len("executing the command locally: "):])
    c.add_notice_handler(notice)
    c.execute("SET citus.log_remote_commands = on")
    c.execute("SET citus.log_local_commands = on")
    try:
        result = q(sql, params, c)
    except psycopg.Error as e:
        result = e
    finally:
        c.execute("RESET citus.log_remote_commands")
        c.execute("RESET citus.log_local_commands")
        c.remove_notice_handler(notice)
    return result, sent


def one_update(sent):
    """Was the write one UPDATE, sent to the shard's worker or run on the coordinator's own shard?"""
    commands = [s[len(LOCALLY):] if s.startswith(LOCALLY) else s for s in sent]
    return len(commands) == 1 and commands[0].startswith("UPDATE ")


def in_transaction_block(sent):
    """Did the writes run in Citus' distributed transaction: the workers'
    commands after a BEGIN, or all of them on the coordinator's own shards,
    in its own transaction?"""
    remote = [s for s in sent if not s.startswith(LOCALLY)]
    return remote[0].startswith("BEGIN") if remote else bool(sent)


@test
def fenced_update_one_round_trip():
    """SELECT fencing.fenced_update(...) as its own statement outside a
    transaction block sends the worker one UPDATE, which commits there (no
    BEGIN, no COMMIT), with every outcome of docs/sql-api.md kept; anywhere else it
    runs in Citus' distributed transaction, all or nothing."""
    distributed("orders", rows=10)
    call = "SELECT fencing.fenced_update('orders', %s, %s, %s, %s)"

    def fu(key, token, changes, on_stale="error", conn=None):
        return remote_commands(call, (f'{{"id": {key}}}', token, changes, on_stale), conn)

    def state(k):
        return q("SELECT v, last_fencing_token FROM orders WHERE id = %s", (k,))[0]

    # Applied: true, one UPDATE statement to the worker, committed there.
    for attempt in range(3):  # the cached plan too
        result, sent = fu(1, 10 + attempt, f'{{"v": "a{attempt}"}}')
        assert result == [(True,)], result
        assert one_update(sent), sent
        assert state(1) == (f"a{attempt}", 10 + attempt)
    # Literal arguments (simple protocol) too.
    result, sent = remote_commands("SELECT fencing.fenced_update('orders', '{\"id\": 2}', 20, '{\"v\": \"lit\"}')")
    assert result == [(True,)] and one_update(sent), (result, sent)
    assert state(2) == ("lit", 20)
    assert one("SHOW citus.function_opens_transaction_block") == "on"
    # Stale: 23T01 naming the table, or false with on_stale => 'skip'; nothing changes.
    result, sent = fu(1, 11, '{"v": "stale"}')
    assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
    assert 'stale fencing token 11 for relation "orders"' in str(result), result
    assert "stored token 12" in (result.diag.message_detail or ""), result.diag.message_detail
    assert not any(s.startswith(("BEGIN", "COMMIT")) for s in sent), sent
    result, sent = fu(1, 11, '{"v": "skipped"}', "skip")
    assert result == [(False,)], result
    assert state(1) == ("a2", 12)
    assert one("SHOW citus.function_opens_transaction_block") == "on"
    # Equal tokens: monotonic accepts, strict refuses.
    assert fu(1, 12, '{"v": "same"}')[0] == [(True,)] and state(1) == ("same", 12)
    # Missing: P0002; a key deleted under a newer token: stale.
    result, _ = fu(99, 30, '{"v": "x"}')
    assert isinstance(result, psycopg.Error) and result.sqlstate == "P0002", result
    in_tx(40, "DELETE FROM orders WHERE id = 3")
    result, _ = fu(3, 39, '{"v": "zombie"}')
    assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
    assert fu(3, 39, '{"v": "zombie"}', "skip")[0] == [(False,)]
    assert one("SELECT count(*) FROM orders WHERE id = 3") == 0
    # Bad arguments are refused before anything is sent.
    for args, sqlstate in ((('{"id": 1}', None, '{}', 'error'), "22004"),
                           (('{"id": 1}', 0, '{}', 'error'), "22023"),
                           (('{"id": 1}', 50, '{"last_fencing_token": 60}', 'error'), "22023"),
                           (('{"id": 1}', 50, '{"id": 2}', 'error'), "22023"),
                           (('{"id": 1}', 50, '{}', 'maybe'), "22023"),
                           (('{"id": 1}', 50, '{"nope": 1}', 'error'), "42703")):
        result, sent = remote_commands(call, args)
        assert isinstance(result, psycopg.Error) and result.sqlstate == sqlstate, (args, result)
        assert sent == [], (args, sent)
    assert state(1) == ("same", 12)
    # A strict table refuses the equal token.
    distributed("strict_orders", rows=2, mode="strict")
    result, _ = remote_commands("SELECT fencing.fenced_update('strict_orders', '{\"id\": 1}', 1, '{}')")
    assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
    assert remote_commands("SELECT fencing.fenced_update('strict_orders', '{\"id\": 1}', 2, '{}')")[0] == [(True,)]
    q("DROP TABLE strict_orders")

    # Anywhere but as its own statement: Citus' distributed transaction.
    # Two calls in one statement, the second stale: neither applies.
    result, sent = remote_commands(
        "SELECT fencing.fenced_update('orders', '{\"id\": 4}', 50, '{\"v\": \"first\"}'),"
        "       fencing.fenced_update('orders', '{\"id\": 1}', 5, '{\"v\": \"second\"}')")
    assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
    assert in_transaction_block(sent), sent
    assert state(4) == ("new", 1)
    # A call on each of several rows, one stale: none applies.
    result, sent = remote_commands(
        "SELECT fencing.fenced_update('orders', jsonb_build_object('id', k), t, '{\"v\": \"many\"}')"
        " FROM (VALUES (4, 50), (1, 5)) AS r(k, t)")
    assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
    assert state(4) == ("new", 1)
    # In a transaction block: rolled back with it, committed with it.
    with connect(autocommit=False) as c:
        result, sent = fu(4, 51, '{"v": "tx"}', conn=c)
        assert result == [(True,)] and in_transaction_block(sent), (result, sent)
        c.rollback()
    assert state(4) == ("new", 1)
    with connect(autocommit=False) as c:
        assert fu(4, 51, '{"v": "tx"}', conn=c)[0] == [(True,)]
        c.execute("UPDATE orders SET v = 'tx2', last_fencing_token = 52 WHERE id = 5")
        c.commit()
    assert state(4) == ("tx", 51) and state(5) == ("tx2", 52)
    # In a function that fails after the call: nothing applies.
    q("""CREATE OR REPLACE FUNCTION pg_temp.then_fail() RETURNS boolean LANGUAGE plpgsql AS $$
         DECLARE r record;
         BEGIN FOR r IN SELECT fencing.fenced_update('orders', '{"id": 6}', 60, '{"v": "fn"}') AS ok LOOP END LOOP;
               RAISE EXCEPTION 'after the call' USING ERRCODE = 'P0001'; END $$""")
    expect_error("P0001", "SELECT pg_temp.then_fail()")
    assert state(6) == ("new", 1)
    # A DO block likewise.
    expect_error("P0001", """DO $$ BEGIN PERFORM fencing.fenced_update('orders', '{"id": 6}', 60, '{"v": "do"}');
                              RAISE EXCEPTION 'after the call' USING ERRCODE = 'P0001'; END $$""")
    assert state(6) == ("new", 1)

    # Roles: without UPDATE, 42501 before anything is sent; with it, the fast path.
    q("DROP ROLE IF EXISTS fencing_reader, fencing_writer")
    q("CREATE ROLE fencing_reader LOGIN")
    q("CREATE ROLE fencing_writer LOGIN")
    q("GRANT USAGE ON SCHEMA fencing TO fencing_reader, fencing_writer")
    q("GRANT SELECT ON orders TO fencing_reader, fencing_writer")
    q("GRANT UPDATE ON orders TO fencing_writer")
    reader = psycopg.connect(user="fencing_reader", autocommit=True)
    writer = psycopg.connect(user="fencing_writer", autocommit=True)
    try:
        result, sent = fu(7, 70, '{"v": "reader"}', conn=reader)
        assert isinstance(result, psycopg.Error) and result.sqlstate == "42501", result
        assert sent == [], sent
        result, sent = fu(7, 70, '{"v": "writer"}', conn=writer)
        assert result == [(True,)] and one_update(sent), (result, sent)
        assert state(7) == ("writer", 70)
        result, _ = fu(7, 69, '{"v": "writer"}', conn=writer)
        assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
        # UPDATE revoked (Citus takes no column privileges): refused again.
        q("REVOKE UPDATE ON orders FROM fencing_writer")
        result, sent = fu(7, 71, '{"v": "revoked"}', conn=writer)
        assert isinstance(result, psycopg.Error) and result.sqlstate == "42501", result
        assert sent == [], sent
        assert state(7) == ("writer", 70)
    finally:
        reader.close()
        writer.close()
        q("DROP OWNED BY fencing_reader, fencing_writer")
        q("DROP ROLE fencing_reader, fencing_writer")

    # The shard's triggers run on the worker, in the write's own transaction.
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        c.execute("""CREATE OR REPLACE FUNCTION public.orders_shout() RETURNS trigger LANGUAGE plpgsql AS $$
                     BEGIN IF NEW.v = 'none' THEN RETURN NULL; END IF;
                           IF NEW.v = 'boom' THEN RAISE EXCEPTION 'boom' USING ERRCODE = 'P0001'; END IF;
                           NEW.v := NEW.v || '!'; RETURN NEW; END $$""")
        c.execute("CREATE TRIGGER shout BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION public.orders_shout()")
        c.commit()
    try:
        assert fu(8, 80, '{"v": "hey"}')[0] == [(True,)] and state(8) == ("hey!", 80)
        result, _ = fu(8, 81, '{"v": "boom"}')
        assert isinstance(result, psycopg.Error) and result.sqlstate == "P0001", result
        assert state(8) == ("hey!", 80)
        result, _ = fu(8, 81, '{"v": "none"}')
        assert isinstance(result, psycopg.Error) and result.sqlstate == "55000", result
        assert state(8) == ("hey!", 80)
    finally:
        with connect(autocommit=False) as c:
            c.execute("SET LOCAL citus.enable_unsafe_triggers = on")
            c.execute("DROP TRIGGER shout ON orders")
            c.commit()
        q("DROP FUNCTION public.orders_shout()")

    # A lower token waits for a higher one's transaction, and is then refused.
    s1 = connect(autocommit=False)
    s1.execute("SET LOCAL fencing.token = 90")
    s1.execute("UPDATE orders SET v = 'holder' WHERE id = 9")
    outcome = []

    def second():
        result, _ = fu(9, 89, '{"v": "late"}')
        outcome.append(result.sqlstate if isinstance(result, psycopg.Error) else result)
    t = threading.Thread(target=second)
    t.start()
    time.sleep(1.0)
    assert t.is_alive(), "fenced_update did not wait for the row"
    s1.commit()
    t.join(30)
    s1.close()
    assert outcome == ["23T01"], outcome
    assert state(9) == ("holder", 90)
    assert one("SHOW citus.function_opens_transaction_block") == "on"


@test
def fenced_update_one_round_trip_only_when_commit_follows():
    """The one-round-trip write commits on the worker at once: it is only
    taken when the statement's own commit follows it directly.  Not in a
    cursor WITH HOLD run at commit (another cursor of the same transaction
    may still fail), not in a pipeline (statements sent before the Sync
    share the implicit transaction, and a later failure rolls all back)."""
    distributed("orders", rows=10)
    call = "SELECT fencing.fenced_update('orders', %s, %s, %s)"

    def state(k):
        return q("SELECT v, last_fencing_token FROM orders WHERE id = %s", (k,))[0]

    # Two holdable cursors declared in one query string run at its commit;
    # the second is stale: the first must not stay written.
    result, sent = remote_commands(
        "DECLARE a CURSOR WITH HOLD FOR SELECT fencing.fenced_update('orders', '{\"id\": 2}', 20, '{\"v\": \"cursor\"}');"
        " DECLARE b CURSOR WITH HOLD FOR SELECT fencing.fenced_update('orders', '{\"id\": 3}', 30, '{\"v\": \"cursor\"}');"
        " DECLARE c CURSOR WITH HOLD FOR SELECT fencing.fenced_update('orders', '{\"id\": 2}', 5, '{\"v\": \"stale\"}')")
    assert isinstance(result, psycopg.Error) and result.sqlstate == "23T01", result
    assert state(2) == ("new", 1) and state(3) == ("new", 1), (state(2), state(3), sent)
    # A pipeline: one implicit transaction up to the Sync; the last call is
    # stale, so nothing of the pipeline may stay.
    with connect() as c:
        try:
            with c.pipeline():
                c.execute(call, ('{"id": 4}', 40, '{"v": "piped"}'))
                c.execute(call, ('{"id": 5}', 50, '{"v": "piped"}'))
                c.execute(call, ('{"id": 4}', 5, '{"v": "stale"}'))
            raise AssertionError("the stale call in the pipeline was accepted")
        except psycopg.Error as e:
            assert e.sqlstate == "23T01", e
    assert state(4) == ("new", 1) and state(5) == ("new", 1), (state(4), state(5))
    # A pipeline whose later statement fails otherwise.
    with connect() as c:
        try:
            with c.pipeline():
                c.execute(call, ('{"id": 6}', 60, '{"v": "piped"}'))
                c.execute("SELECT 1/0")
            raise AssertionError("division by zero succeeded")
        except psycopg.Error as e:
            assert e.sqlstate == "22012", e
    assert state(6) == ("new", 1), state(6)
    # Still one round trip for a statement of its own, also with parameters
    # (extended protocol, Sync right after), and after a pipeline.
    for k, params in ((7, True), (8, False)):
        if params:
            result, sent = remote_commands(call, (f'{{"id": {k}}}', 70, '{"v": "alone"}'))
        else:
            result, sent = remote_commands(
                f"SELECT fencing.fenced_update('orders', '{{\"id\": {k}}}', 70, '{{\"v\": \"alone\"}}')")
        assert result == [(True,)] and one_update(sent), (result, sent)
        assert state(k) == ("alone", 70)
    assert one("SHOW citus.function_opens_transaction_block") == "on"


@test
def table_owner_not_superuser():
    """A table owner without superuser rights protects and uses its own distributed table."""
    q("DROP TABLE IF EXISTS owned")
    q("SELECT fencing_internal._citus_floors()")  # first_protect_by_table_owner covers its absence
    q("DROP ROLE IF EXISTS fencing_app, fencing_clerk")
    q("CREATE ROLE fencing_app LOGIN")
    q("CREATE ROLE fencing_clerk LOGIN")
    q("GRANT USAGE ON SCHEMA fencing TO fencing_app, fencing_clerk")
    q("GRANT CREATE ON SCHEMA public TO fencing_app")
    app = psycopg.connect(user="fencing_app", autocommit=True)
    q("CREATE TABLE owned (id int PRIMARY KEY, v text)", conn=app)
    q("SELECT create_distributed_table('owned', 'id')", conn=app)
    q("SELECT fencing.protect('owned')", conn=app)
    q("GRANT SELECT, INSERT, UPDATE, DELETE ON owned TO fencing_clerk", conn=app)

    def as_role(conn, token, *statements):
        with conn.transaction():
            conn.execute(f"SET LOCAL fencing.token = {token}")
            for st in statements:
                conn.execute(st)
    as_role(app, 10, "INSERT INTO owned SELECT g, 'new' FROM generate_series(1, 10) g")
    as_role(app, 20, "DELETE FROM owned WHERE id = 1")
    clerk = psycopg.connect(user="fencing_clerk", autocommit=True)
    for conn in (app, clerk):
        try:
            as_role(conn, 19, "INSERT INTO owned VALUES (1, 'zombie')")
            raise AssertionError("stale re-insert accepted")
        except psycopg.Error as e:
            assert e.sqlstate == "23T01", e
    as_role(clerk, 21, "UPDATE owned SET v = 'clerk' WHERE id = 2")
    # fenced_update of the deleted key: the owner reads the marks (23T01); a
    # role that may not is told nothing of them (P0002); the write is refused either way.
    expect_error("23T01", "SELECT fencing.fenced_update('owned', '{\"id\": 1}', 19, '{}')", conn=app)
    expect_error("P0002", "SELECT fencing.fenced_update('owned', '{\"id\": 1}', 19, '{}')", conn=clerk)
    expect_error("42501", "SELECT * FROM fencing_citus.floors", conn=clerk)
    owned_oid = one("SELECT 'owned'::regclass::oid")
    expect_error("42501", f"SELECT * FROM fencing_citus.marks_{owned_oid}", conn=clerk)
    as_role(app, 30, "TRUNCATE owned")
    try:
        as_role(app, 29, "INSERT INTO owned VALUES (50, 'stale')")
        raise AssertionError("stale insert after TRUNCATE accepted")
    except psycopg.Error as e:
        assert e.sqlstate == "23T01", e
    # Re-syncing a node's metadata rebuilds the table's shell there, triggers included.
    for port in WORKERS[:1]:
        q("SELECT stop_metadata_sync_to_node('127.0.0.1', %s)", (port,))
        q("SELECT start_metadata_sync_to_node('127.0.0.1', %s)", (port,))
    q("DROP TABLE owned", conn=app)
    assert one("SELECT count(*) FROM pg_class WHERE relname LIKE 'marks\\_%%' AND relowner = 'fencing_app'::regrole") == 0
    app.close()
    clerk.close()
    q("REVOKE ALL ON SCHEMA fencing FROM fencing_app, fencing_clerk")
    q("REVOKE CREATE ON SCHEMA public FROM fencing_app")
    q("DROP OWNED BY fencing_app, fencing_clerk")
    q("DROP ROLE fencing_app, fencing_clerk")


@test
def distributed_after_protect():
    """A table protected while local and then distributed (Citus must be told
    to accept its triggers) takes no write until it is protected again: its
    marks would not move with its shards."""
    q("DROP TABLE IF EXISTS late")
    q("CREATE TABLE late (id int PRIMARY KEY, v text)")
    q("SELECT fencing.protect('late')")
    in_tx(5, "INSERT INTO late VALUES (1, 'a')")
    expect_error("XX000", "SELECT create_distributed_table('late', 'id')")  # Citus: it has triggers
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        # Its rows reach the shards through the guard, which refuses them
        # (Citus reports a worker's error as its own, XX000; a shard on the
        # coordinator raises the guard's own).
        expect_error(("XX000", "55000"), "SELECT create_distributed_table('late', 'id')", conn=c,
                     contains=['relation "late" was distributed by Citus after it was protected'])
        c.rollback()
    in_tx(6, "DELETE FROM late")
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        c.execute("SELECT create_distributed_table('late', 'id')")
        c.commit()
    tx_error("55000", 7, "INSERT INTO late VALUES (1, 'b')", contains=['relation "late"'])
    q("SELECT fencing.protect('late')")
    in_tx(7, "INSERT INTO late VALUES (1, 'b')")
    in_tx(8, "DELETE FROM late WHERE id = 1")
    if len(SHARD_NODES) > 1:
        move(shard_of("late", 1))
    tx_error("23T01", 7, "INSERT INTO late VALUES (1, 'zombie')")
    q("DROP TABLE late")


@test
def shard_named_without_metadata():
    """Citus may copy a table's rows into its new shards over a connection
    that does not see the shard's metadata yet (it depends on which of its
    connections created the shard): the guard then knows the shard by its
    name and its trigger's, and still names the distributed table.  Made
    here on a worker by hand: a relation named as a shard of "mimic", with
    no metadata at all."""
    w = connect(port=W1 or COORD)  # a worker; on a single node, the node
    q("DROP TABLE IF EXISTS mimic_990001", conn=w)
    q("CREATE TABLE mimic_990001 (id int PRIMARY KEY, v text, last_fencing_token bigint)", conn=w)

    def guard(name, *args):
        arglist = ", ".join(f"'{a}'" for a in args)
        q(f"CREATE TRIGGER {name} BEFORE INSERT OR UPDATE ON mimic_990001"
          f" FOR EACH ROW EXECUTE FUNCTION fencing.guard({arglist})", conn=w)

    def insert():
        return expect_error("55000", "INSERT INTO mimic_990001 VALUES (1, 'x', 5)", conn=w)

    guard("fencing_guard_990001", "last_fencing_token", "monotonic")
    insert_error = insert()
    assert 'relation "mimic" was distributed by Citus after it was protected' in str(insert_error), insert_error
    assert "fencing.protect('public.mimic')" in (insert_error.diag.message_hint or ""), insert_error.diag.message_hint
    # Names that do not match: the registry's refusal, naming the relation
    # itself.  A guard protected as distributed (three arguments) whose marks
    # id no metadata here records for the relation: refused before it acts.
    for trigger, args in [("fencing_guard_990002", ("last_fencing_token", "monotonic")),
                          ("other_990001", ("last_fencing_token", "monotonic")),
                          ("fencing_guard_990001", ("last_fencing_token", "monotonic", "77"))]:
        q("DROP TRIGGER IF EXISTS fencing_guard_990001 ON mimic_990001", conn=w)
        q("DROP TRIGGER IF EXISTS fencing_guard_990002 ON mimic_990001", conn=w)
        q("DROP TRIGGER IF EXISTS other_990001 ON mimic_990001", conn=w)
        guard(trigger, *args)
        e = insert()
        expected = ('trigger "fencing_guard_990001" on relation "mimic_990001" was not installed'
                    if len(args) == 3 else 'relation "mimic_990001" is not protected by fencing.protect()')
        assert expected in str(e), (trigger, args, e)
    assert one("SELECT count(*) FROM mimic_990001", conn=w) == 0
    q("DROP TABLE mimic_990001", conn=w)

    # Names that need quoting: the hint is SQL to paste, so the name goes in
    # as a literal; a quote in it cannot end the literal.
    def named(relname, shard):
        ident = '"' + relname.replace('"', '""') + '"'
        q(f"DROP TABLE IF EXISTS {ident}", conn=w)
        q(f"CREATE TABLE {ident} (id int PRIMARY KEY, last_fencing_token bigint)", conn=w)
        q(f"CREATE TRIGGER fencing_guard_{shard} BEFORE INSERT OR UPDATE ON {ident}"
          " FOR EACH ROW EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic')", conn=w)
        e = expect_error("55000", f"INSERT INTO {ident} VALUES (1, 5)", conn=w)
        q(f"DROP TABLE {ident}", conn=w)
        return str(e), e.diag.message_hint or ""

    text, hint = named("x'); DROP TABLE t; --_990003", 990003)
    assert 'relation "x\'); DROP TABLE t; --" was distributed by Citus after it was protected' in text, text
    assert hint == "Run SELECT fencing.protect('public.\"x''); DROP TABLE t; --\"') again.", hint
    # A name Citus had to cut for its suffix ("<cut>_<8 hex digits>_<shard
    # id>", 60 to 63 bytes) does not hold the table's name: the registry's
    # refusal.  The same length without the hash: the table it names.
    cut = "a" * 45 + "_deadbeef_990004"
    text, hint = named(cut, 990004)
    assert f'relation "{cut}" is not protected by fencing.protect()' in text, text
    text, hint = named("a" * 54 + "_990005", 990005)
    assert f'relation "{"a" * 54}" was distributed by Citus after it was protected' in text, text
    w.close()


def forged_guard(colocate):
    """An ordinary role copies the victim's guard onto a distributed table of
    its own (a row trigger named fencing_guard carrying the victim's marks id,
    and a TRUNCATE trigger) and truncates it with the highest token: the
    victim's floor must not move, and the victim keeps taking new keys."""
    distributed("victim", rows=5)
    victim = one("SELECT 'victim'::regclass::oid")
    q("DROP TABLE IF EXISTS forger")
    q("DROP ROLE IF EXISTS fencing_forger")
    q("CREATE ROLE fencing_forger LOGIN")
    q("GRANT USAGE ON SCHEMA fencing TO fencing_forger")
    q("GRANT CREATE ON SCHEMA public TO fencing_forger")
    floor_before = one("SELECT token FROM fencing_citus.floors WHERE id = %s", (victim,))
    f = psycopg.connect(user="fencing_forger", autocommit=True)
    try:
        q("CREATE TABLE forger (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0)",
          conn=f)
        q("SELECT create_distributed_table('forger', 'id'" +
          (", colocate_with => 'victim')" if colocate else ")"), conn=f)
        q("SET citus.enable_unsafe_triggers = on", conn=f)
        q("CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON forger FOR EACH ROW"
          f" EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic', '{victim}')", conn=f)
        q("CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON forger"
          " FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard()", conn=f)
        for sql in ["TRUNCATE forger", "INSERT INTO forger VALUES (1, 'x')",
                    "INSERT INTO forger VALUES (2, 'x'); DELETE FROM forger"]:
            try:
                with f.transaction():
                    f.execute("SET LOCAL fencing.token = 9223372036854775807")
                    f.execute(sql)
            except psycopg.Error as e:
                assert e.sqlstate in ("55000", "XX000"), (sql, e.sqlstate, e)
        assert one("SELECT token FROM fencing_citus.floors WHERE id = %s", (victim,)) == floor_before
        assert one(f"SELECT count(*) FROM fencing_citus.marks_{victim}"
                   " WHERE token = 9223372036854775807") == 0
        in_tx(1000, "INSERT INTO victim VALUES (1000, 'new key')")
        assert token_of("victim", 1000) == 1000
    finally:
        f.close()
        q("DROP TABLE IF EXISTS forger")
        q("DROP TABLE IF EXISTS victim")
        q("REVOKE ALL ON SCHEMA fencing FROM fencing_forger")
        q("REVOKE CREATE ON SCHEMA public FROM fencing_forger")
        q("DROP OWNED BY fencing_forger")
        q("DROP ROLE fencing_forger")


@test
def forged_guard_names_no_other_table():
    forged_guard(colocate=False)


@test
def forged_guard_colocated():
    forged_guard(colocate=True)


@test
def squatted_marks_name():
    """An ordinary role cannot take the name of another role's marks table in
    fencing_citus (CREATE, CREATE TABLE AS, RENAME, SET SCHEMA, a shard's
    name, other objects): each refused with 42501; the owner then protects."""
    q("DROP TABLE IF EXISTS later")
    q("DROP ROLE IF EXISTS fencing_squatter")
    q("CREATE ROLE fencing_squatter LOGIN")
    q("GRANT USAGE ON SCHEMA fencing TO fencing_squatter")
    q("GRANT CREATE ON SCHEMA public TO fencing_squatter")
    q("CREATE TABLE later (id int PRIMARY KEY, v text)")
    q("SELECT create_distributed_table('later', 'id')")
    q("SELECT fencing_internal._citus_floors()")
    later = one("SELECT 'later'::regclass::oid")
    s = psycopg.connect(user="fencing_squatter", autocommit=True)
    try:
        for sql in [f"CREATE TABLE fencing_citus.marks_{later} (x int)",
                    f"CREATE TABLE fencing_citus.marks_{later} AS SELECT 1 AS x",
                    f"CREATE TABLE fencing_citus.marks_{later}_102999 (x int)",
                    "CREATE TABLE fencing_citus.anything (x int)",
                    "CREATE VIEW fencing_citus.v AS SELECT 1 AS x",
                    "CREATE FUNCTION fencing_citus.f() RETURNS int LANGUAGE sql AS 'SELECT 1'"]:
            expect_error("42501", sql, conn=s)
        q("CREATE TABLE public.squat (x int)", conn=s)
        expect_error("42501", "ALTER TABLE public.squat SET SCHEMA fencing_citus", conn=s)
        assert one("SELECT count(*) FROM pg_class WHERE relnamespace = 'fencing_citus'::regnamespace"
                   " AND relowner = 'fencing_squatter'::regrole") == 0
        assert one("SELECT count(*) FROM pg_proc WHERE pronamespace = 'fencing_citus'::regnamespace") == 0
        q("SELECT fencing.protect('later')")
        in_tx(5, "INSERT INTO later VALUES (1, 'x')", "DELETE FROM later WHERE id = 1")
        tx_error("23T01", 4, "INSERT INTO later VALUES (1, 'zombie')")
    finally:
        s.close()
        q("DROP TABLE IF EXISTS later")
        q("DROP TABLE IF EXISTS public.squat")
        q("REVOKE ALL ON SCHEMA fencing FROM fencing_squatter")
        q("REVOKE CREATE ON SCHEMA public FROM fencing_squatter")
        q("DROP OWNED BY fencing_squatter")
        q("DROP ROLE fencing_squatter")


def attack4_roles(*roles):
    for r in roles:
        q(f"DROP OWNED BY {r}") if one("SELECT count(*) FROM pg_roles WHERE rolname = %s", (r,)) else None
        q(f"DROP ROLE IF EXISTS {r}")
        q(f"CREATE ROLE {r} LOGIN")
        q(f"GRANT USAGE ON SCHEMA fencing TO {r}")
        q(f"GRANT CREATE ON SCHEMA public TO {r}")


def attack4_drop_roles(*roles):
    for r in roles:
        q(f"REVOKE ALL ON SCHEMA fencing FROM {r}")
        q(f"REVOKE CREATE ON SCHEMA public FROM {r}")
        for port in NODES:
            with connect(port=port) as c:
                try:
                    q(f"DROP OWNED BY {r}", conn=c)
                except psycopg.Error:
                    pass
        q(f"DROP ROLE {r}")


def burn_oids_until(conn, last):
    """Allocates OIDs (lo_create, any role may) on conn's node until the last one allocated is `last`."""
    q("DO $$ DECLARE o oid; BEGIN LOOP o := pg_catalog.lo_create(0); PERFORM pg_catalog.lo_unlink(o);"
      f" EXIT WHEN o >= {int(last)}; END LOOP; END $$", conn=conn)


@test(nodes=2)
def worker_records_another_tables_id():
    """An ordinary role connects to a worker, where its distributed table's
    shell has an OID that is, on the coordinator, the OID of another role's
    protected table (OIDs are per node; lo_create() moves a node's counter),
    and calls fencing_internal._citus_record_shards() on it there: that must neither
    drop the victim's record (its writes refused) nor record the role's own
    shards under the victim's marks id (a forged guard then raising the
    victim's floor to 2^63-1 through TRUNCATE, which no protect() lowers)."""
    for t in ("victim4", "mallory4"):
        q(f"DROP TABLE IF EXISTS {t}")
    attack4_roles("fencing_v4victim", "fencing_v4mallory")
    q("SELECT fencing_internal._citus_floors()")
    victim = psycopg.connect(user="fencing_v4victim", autocommit=True)
    mc = psycopg.connect(user="fencing_v4mallory", autocommit=True)
    mw = psycopg.connect(user="fencing_v4mallory", autocommit=True, port=W1)
    try:
        coord_next = one("SELECT lo_create(0)")
        q("SELECT lo_unlink(%s)", (coord_next,))
        burn_oids_until(mw, coord_next + 200)  # the worker's counter well above the coordinator's
        q("CREATE TABLE mallory4 (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0)",
          conn=mc)
        q("SELECT create_distributed_table('mallory4', 'id')", conn=mc)
        shell = one("SELECT 'mallory4'::regclass::oid", conn=mw)
        # The victim's table gets, on the coordinator, the OID of that shell on the worker.
        burn_oids_until(db, shell - 1)
        q("CREATE TABLE victim4 (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0)",
          conn=victim)
        victim_oid = one("SELECT 'victim4'::regclass::oid")
        assert victim_oid == shell, ("setup: OIDs did not line up", victim_oid, shell)
        q("SELECT create_distributed_table('victim4', 'id')", conn=victim)
        q("SELECT fencing.protect('victim4')", conn=victim)
        in_tx(5, "INSERT INTO victim4 SELECT g, 'a', 5 FROM generate_series(1, 10) g")
        floor_before = one("SELECT token FROM fencing_citus.floors WHERE id = %s", (victim_oid,))
        # The attack, as the ordinary role: on the worker, then on the coordinator.
        try:
            q("SELECT fencing_internal._citus_record_shards('mallory4')", conn=mw)
        except psycopg.Error:
            pass
        recorded_for_victim = one("SELECT count(*) FROM fencing_citus.shards s JOIN pg_dist_shard d"
                                  " USING (shardid) WHERE s.id = %s AND d.logicalrelid = 'victim4'::regclass",
                                  (victim_oid,))
        recorded_for_mallory = one("SELECT count(*) FROM fencing_citus.shards s JOIN pg_dist_shard d"
                                   " USING (shardid) WHERE s.id = %s AND d.logicalrelid = 'mallory4'::regclass",
                                   (victim_oid,))
        victim_writes = "accepted"
        try:
            in_tx(6, "INSERT INTO victim4 VALUES (100, 'after the record', 6)")
        except psycopg.Error as e:
            victim_writes = f"{e.sqlstate}: {e}"
        q("SET citus.enable_unsafe_triggers = on", conn=mc)
        q("CREATE TRIGGER fencing_guard BEFORE INSERT OR UPDATE OR DELETE ON mallory4 FOR EACH ROW"
          f" EXECUTE FUNCTION fencing.guard('last_fencing_token', 'monotonic', '{victim_oid}')", conn=mc)
        q("CREATE TRIGGER fencing_guard_truncate BEFORE TRUNCATE ON mallory4"
          " FOR EACH STATEMENT EXECUTE FUNCTION fencing.guard()", conn=mc)
        try:
            with mc.transaction():
                mc.execute("SET LOCAL fencing.token = 9223372036854775807")
                mc.execute("TRUNCATE mallory4")
        except psycopg.Error:
            pass
        floor_after = one("SELECT token FROM fencing_citus.floors WHERE id = %s", (victim_oid,))
        # The owner's remedy: protect() again; a new key with a fresh token.
        q("SELECT fencing.protect('victim4')", conn=victim)
        new_key = "accepted"
        try:
            in_tx(1000, "INSERT INTO victim4 VALUES (1000, 'new key', 1000)")
        except psycopg.Error as e:
            new_key = f"{e.sqlstate}: {e}"
        problems = []
        if recorded_for_victim != 4:
            problems.append(f"the victim's shards lost their record ({recorded_for_victim} of 4 left);"
                            f" the victim's write: {victim_writes}")
        if recorded_for_mallory:
            problems.append(f"{recorded_for_mallory} shards of the attacker's table recorded under the"
                            " victim's marks id")
        if floor_after != floor_before:
            problems.append(f"the victim's floor moved from {floor_before} to {floor_after}")
        if new_key != "accepted":
            problems.append(f"the victim's new key after protect() again: {new_key}")
        assert not problems, "; ".join(problems)
    finally:
        for c in (victim, mc, mw):
            c.close()
        q("DROP TABLE IF EXISTS mallory4")
        q("DROP TABLE IF EXISTS victim4")
        attack4_drop_roles("fencing_v4victim", "fencing_v4mallory")


@test
def spoofed_citus_application_name():
    """A partition's owner (not the protected table's) who names its
    connection application_name = 'citus_internal' must still be refused
    (42501) DISABLE TRIGGER on the guard (issue 26, finding 3); the DDL
    follower skips such connections as Citus' own."""
    q("DROP TABLE IF EXISTS lp4")
    attack4_roles("fencing_v4victim", "fencing_v4mallory")
    q("CREATE TABLE lp4 (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0)"
      " PARTITION BY RANGE (id)")
    q("CREATE TABLE lp4_1 PARTITION OF lp4 FOR VALUES FROM (0) TO (1000)")
    q("SELECT fencing.protect('lp4')")
    in_tx(10, "INSERT INTO lp4 VALUES (1, 'a', 10)")
    q("ALTER TABLE lp4 OWNER TO fencing_v4victim")
    q("ALTER TABLE lp4_1 OWNER TO fencing_v4mallory")
    try:
        plain = psycopg.connect(user="fencing_v4mallory", autocommit=True)
        expect_error("42501", "ALTER TABLE lp4_1 DISABLE TRIGGER fencing_guard", conn=plain)
        plain.close()
        spoof = psycopg.connect(user="fencing_v4mallory", autocommit=True, application_name="citus_internal")
        outcomes = []
        for sql in ["ALTER TABLE lp4_1 DISABLE TRIGGER fencing_guard", "ALTER TABLE lp4_1 DISABLE TRIGGER USER"]:
            try:
                q(sql, conn=spoof)
                outcomes.append(f"{sql}: accepted")
            except psycopg.Error as e:
                if e.sqlstate != "42501":
                    outcomes.append(f"{sql}: {e.sqlstate}")
        spoof.close()
        disabled = one("SELECT count(*) FROM pg_trigger WHERE tgrelid = 'lp4_1'::regclass AND tgenabled = 'D'")
        stale = "refused"
        try:
            in_tx(3, "UPDATE lp4 SET v = 'stale', last_fencing_token = 3 WHERE id = 1")
            stale = "accepted"
        except psycopg.Error:
            pass
        assert not outcomes and disabled == 0 and stale == "refused", \
            (outcomes, f"{disabled} guard triggers disabled", f"stale token 3 over 10: {stale}")
    finally:
        q("DROP TABLE IF EXISTS lp4")
        attack4_drop_roles("fencing_v4victim", "fencing_v4mallory")


@test
def squatted_marks_name_by_index():
    """On the coordinator, an ordinary role makes the marks table of its own
    table (allowed), then an index on it named for another role's marks
    table (CREATE INDEX, ALTER INDEX ... RENAME): refused with 42501; the
    owner then protects (finding 6)."""
    for t in ("later5", "mine5"):
        q(f"DROP TABLE IF EXISTS {t}")
    attack4_roles("fencing_v4victim", "fencing_v4mallory")
    q("SELECT fencing_internal._citus_floors()")
    victim = psycopg.connect(user="fencing_v4victim", autocommit=True)
    m = psycopg.connect(user="fencing_v4mallory", autocommit=True)
    try:
        q("CREATE TABLE later5 (id int PRIMARY KEY, v text)", conn=victim)
        q("SELECT create_distributed_table('later5', 'id')", conn=victim)
        later = one("SELECT 'later5'::regclass::oid")
        q("CREATE TABLE mine5 (id int PRIMARY KEY)", conn=m)
        mine = one("SELECT 'mine5'::regclass::oid")
        outcomes = []
        for sql in [f"CREATE TABLE fencing_citus.marks_{mine} (x int)",
                    f"CREATE INDEX marks_{later} ON fencing_citus.marks_{mine} (x)"]:
            try:
                q(sql, conn=m)
                outcomes.append(f"{sql}: accepted")
            except psycopg.Error as e:
                outcomes.append(f"{sql}: {e.sqlstate}")
        protect = "ok"
        try:
            q("SELECT fencing.protect('later5')", conn=victim)
        except psycopg.Error as e:
            protect = f"{e.sqlstate}: {e}"
        assert protect == "ok" and not any(o.endswith("accepted") and f"marks_{later} " in o for o in outcomes), \
            (outcomes, "protect():", protect)
    finally:
        victim.close()
        m.close()
        q("DROP TABLE IF EXISTS later5")
        q(f"DROP TABLE IF EXISTS mine5")
        attack4_drop_roles("fencing_v4victim", "fencing_v4mallory")

def no_marks_yet():
    """Makes the cluster one where no distributed table was protected (no
    schema fencing_citus), unless some marks table exists; False then."""
    if one("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
           " WHERE n.nspname = 'fencing_citus' AND c.relname LIKE 'marks%%'"):
        return False
    q("DROP SCHEMA IF EXISTS fencing_citus CASCADE")
    return True


def placements_by_node(table):
    """{port: number of the table's shard placements there}."""
    return dict(q("SELECT p.nodeport, count(*) FROM pg_dist_shard s JOIN pg_dist_shard_placement p"
                  " USING (shardid) WHERE s.logicalrelid = %s::regclass GROUP BY 1", (table,)))


@test(first=True)
def owner_protects_own_schema_table():
    """A role that is not a superuser owns schema v and table v.orders,
    distributed over every node that holds shards (the coordinator too, in
    the topologies where it holds some): it runs the _citus_floors() call
    protect()'s hint names, protects the table (its marks table's shards are
    made beside each of its shards, the coordinator's included), and then
    writes with tokens from acquire(): fenced writes, stale refusals, marks
    of deleted keys on every node, a TRUNCATE floor, and fence()."""
    fresh = no_marks_yet()
    q("DROP SCHEMA IF EXISTS v CASCADE")
    attack4_roles("fencing_v_owner")
    q("GRANT CREATE ON DATABASE postgres TO fencing_v_owner")
    owner = psycopg.connect(user="fencing_v_owner", autocommit=True)

    def as_owner(token, *statements):
        with owner.transaction():
            if token is not None:
                owner.execute(f"SET LOCAL fencing.token = {int(token)}")
            for st in statements:
                owner.execute(st)

    def refused(sqlstate, token, statement):
        try:
            as_owner(token, statement)
        except psycopg.Error as e:
            assert e.sqlstate == sqlstate, (statement, e.sqlstate, e)
            return e
        raise AssertionError(f"{statement!r} with token {token}: accepted, expected {sqlstate}")

    try:
        q("CREATE SCHEMA v", conn=owner)
        q("CREATE TABLE v.orders (id int PRIMARY KEY, status text)", conn=owner)
        q("SELECT create_distributed_table('v.orders', 'id')", conn=owner)
        oid = one("SELECT 'v.orders'::regclass::oid")
        if fresh:
            e = expect_error("55000", "SELECT fencing.protect('v.orders', 'token')", conn=owner)
            hint = e.diag.message_hint or ""
            assert "SELECT fencing_internal._citus_floors();" in hint, hint
            assert one("SELECT to_regnamespace('fencing_citus') IS NULL")
            q(hint.split("Run ", 1)[1].split(";", 1)[0], conn=owner)  # the hint's own SQL
        else:
            print(f"citus: {PREFIX}owner_protects_own_schema_table: fencing_citus exists already", flush=True)
        q("SELECT fencing.protect('v.orders', 'token')", conn=owner)
        # The marks table is the owner's; its shards sit beside the table's, node by node.
        assert one(f"SELECT relowner::regrole::text FROM pg_class WHERE oid = 'fencing_citus.marks_{oid}'::regclass") \
            == "fencing_v_owner"
        placements = placements_by_node("v.orders")
        assert set(placements) == set(SHARD_NODES), (placements, SHARD_NODES)
        assert placements_by_node(f"fencing_citus.marks_{oid}") == placements
        shards = relations_named(f"marks\\_{oid}\\_%")
        assert sorted(p for p, name in shards if "pkey" not in name) == \
            sorted(p for p, n in placements.items() for _ in range(n)), (shards, placements)
        # Keys on every node that holds shards.
        keys, seen = [], set()
        for k in range(1, 200):
            if node_of("v.orders", k) not in seen:
                seen.add(node_of("v.orders", k))
                keys.append(k)
        assert seen == set(SHARD_NODES), seen
        # Fenced writes with tokens acquire() issued to the owner.
        q("DELETE FROM fencing.resources WHERE resource LIKE 'v-order:%%'")
        t1 = one("SELECT fencing.acquire('v-order:all', 'owner-a', '10 s')", conn=owner)
        as_owner(t1, "INSERT INTO v.orders SELECT g, 'new' FROM generate_series(1, 200) g")
        assert one("SELECT count(*) FROM v.orders WHERE token = %s", (t1,)) == 200
        assert one("SELECT fencing.release('v-order:all', 'owner-a', %s)", (t1,), conn=owner) is True
        t2 = one("SELECT fencing.acquire('v-order:all', 'owner-b', '10 s')", conn=owner)
        assert t2 > t1
        for k in keys:
            assert one("SELECT fencing.fenced_update('v.orders', jsonb_build_object('id', %s::int), %s,"
                       " '{\"status\": \"paid\"}')", (k, t2), conn=owner) is True
        # Stale: the older holder's writes are refused on every node, nothing changes.
        for k in keys:
            e = refused("23T01", t1, f"UPDATE v.orders SET status = 'stale' WHERE id = {k}")
            assert 'relation "orders"' in str(e) and "orders_" not in str(e), e
            expect_error("23T01", "SELECT fencing.fenced_update('v.orders', jsonb_build_object('id', %s::int),"
                         " %s, '{\"status\": \"stale\"}')", (k, t1), conn=owner)
        for k in keys:
            refused("23T02", None, f"UPDATE v.orders SET status = 'unfenced' WHERE id = {k}")
        assert q("SELECT DISTINCT status, token FROM v.orders WHERE id = ANY(%s)", (keys,)) == [("paid", t2)]
        # Marks of deleted keys, on each node: no re-insert under the older token.
        as_owner(t2, f"DELETE FROM v.orders WHERE id IN ({', '.join(map(str, keys))})")
        marks = q(f"SELECT DISTINCT token FROM fencing_citus.marks_{oid}", conn=owner)
        assert marks == [(t2,)], marks
        assert one(f"SELECT count(*) FROM fencing_citus.marks_{oid}", conn=owner) == len(keys)
        for k in keys:
            refused("23T01", t1, f"INSERT INTO v.orders VALUES ({k}, 'zombie')")
            expect_error("23T01", "SELECT fencing.fenced_update('v.orders', jsonb_build_object('id', %s::int),"
                         " %s, '{}')", (k, t1), conn=owner)
        as_owner(t2, *[f"INSERT INTO v.orders VALUES ({k}, 'again')" for k in keys])
        # fence(): the resource's own high-water mark, in the same transaction as a write.
        assert one("SELECT fencing.fence('v-order:all', %s)", (t2,), conn=owner) == 0
        with owner.transaction():
            owner.execute(f"SET LOCAL fencing.token = {t2}")
            assert owner.execute("SELECT fencing.fence('v-order:all', %s)", (t2,)).fetchone()[0] == t2
            owner.execute(f"UPDATE v.orders SET status = 'fenced' WHERE id = {keys[0]}")
        expect_error("23T01", "SELECT fencing.fence('v-order:all', %s)", (t1,), conn=owner)
        # TRUNCATE: refused under the older token; under the newer one, a floor on every node.
        refused("23T01", t1, "TRUNCATE v.orders")
        as_owner(t2, "TRUNCATE v.orders")
        for k in keys:
            refused("23T01", t1, f"INSERT INTO v.orders VALUES ({k + 1000}, 'never seen')")
        assert one("SELECT fencing.high_water_mark()") >= t2
    finally:
        owner.close()
        q("DROP SCHEMA IF EXISTS v CASCADE")
        q("REVOKE CREATE ON DATABASE postgres FROM fencing_v_owner")
        attack4_drop_roles("fencing_v_owner")


@test
def squatted_marks_name_on_each_node():
    """On every node (the coordinator, holding shards or not, and each
    worker), an ordinary role that logs in there directly cannot take the
    name of a protected table's marks table or of a shard of it, nor put a
    view, sequence or other table there: 42501, nothing left."""
    q("DROP TABLE IF EXISTS squat6")
    attack4_roles("fencing_v6victim", "fencing_v6mallory")
    q("SELECT fencing_internal._citus_floors()")
    victim = psycopg.connect(user="fencing_v6victim", autocommit=True)
    try:
        q("CREATE TABLE squat6 (id int PRIMARY KEY, v text)", conn=victim)
        q("SELECT create_distributed_table('squat6', 'id')", conn=victim)
        q("SELECT fencing.protect('squat6')", conn=victim)
        oid = one("SELECT 'squat6'::regclass::oid")
        next_shard = one("SELECT max(shardid) + 1 FROM pg_dist_shard")
        a_shard = one(f"SELECT min(shardid) FROM pg_dist_shard WHERE logicalrelid = 'fencing_citus.marks_{oid}'::regclass")
        outcomes = []
        for port in NODES:
            m = psycopg.connect(user="fencing_v6mallory", autocommit=True, port=port)
            try:
                q(f"DROP TABLE IF EXISTS public.mine6, public.marks_{oid}_{next_shard + 3}", conn=m)
                q("CREATE TABLE public.mine6 (x int)", conn=m)
                q(f"CREATE TABLE public.marks_{oid}_{next_shard + 3} (x int)", conn=m)
                # A name never protected: the coordinator knows <oid> names no
                # table; a worker cannot tell (docs/citus.md, Roles).
                never = ["CREATE TABLE fencing_citus.marks_4294967295 (x int)"] if port == COORD else []
                for sql in never + [
                            f"CREATE TABLE fencing_citus.marks_{oid}_{next_shard} (x int)",
                            f"CREATE TABLE fencing_citus.marks_{oid}_{a_shard + 100000} (x int)",
                            f"CREATE TABLE fencing_citus.marks_{oid}_{next_shard} AS SELECT 1 AS x",
                            f"CREATE VIEW fencing_citus.marks_{oid}_{next_shard + 1} AS SELECT 1 AS x",
                            f"CREATE SEQUENCE fencing_citus.marks_{oid}_{next_shard + 2}",
                            f"CREATE TABLE fencing_citus.marks_0{oid}_{next_shard} (x int)",
                            "CREATE TABLE fencing_citus.floors_1 (x int)",
                            "ALTER TABLE public.mine6 SET SCHEMA fencing_citus",
                            f"ALTER TABLE public.marks_{oid}_{next_shard + 3} SET SCHEMA fencing_citus"]:
                    try:
                        q(sql, conn=m)
                        outcomes.append(f"port {port}: {sql}: accepted")
                    except psycopg.Error as e:
                        # Citus itself refuses views on a worker.
                        if e.sqlstate != "42501" and not (
                                port != COORD and e.sqlstate == "XX000" and sql.startswith("CREATE VIEW")
                                and "operation is not allowed on this node" in str(e)):
                            outcomes.append(f"port {port}: {sql}: {e.sqlstate} {e}")
                left = q("SELECT relname::text FROM pg_class WHERE relnamespace = 'fencing_citus'::regnamespace"
                         " AND relowner = 'fencing_v6mallory'::regrole", conn=m)
                if left:
                    outcomes.append(f"port {port}: left {left}")
            finally:
                q(f"DROP TABLE IF EXISTS public.mine6, public.marks_{oid}_{next_shard + 3}", conn=m)
                m.close()
        assert not outcomes, outcomes
        # The victim's table keeps working, its marks too.
        in_tx(5, "INSERT INTO squat6 VALUES (1, 'x')", "DELETE FROM squat6 WHERE id = 1")
        tx_error("23T01", 4, "INSERT INTO squat6 VALUES (1, 'zombie')")
    finally:
        victim.close()
        q("DROP TABLE IF EXISTS squat6")
        attack4_drop_roles("fencing_v6victim", "fencing_v6mallory")


@test(first=True)
def first_protect_by_table_owner():
    """On a cluster where no distributed table was protected yet (no schema
    fencing_citus), a table owner without superuser rights is told to make
    the schema in a transaction of its own first (55000, the workers would
    not see it), and then protects its distributed table."""
    if not no_marks_yet():
        print("citus: first_protect_by_table_owner skipped (marks tables exist)", flush=True)
        return
    q("DROP TABLE IF EXISTS first4")
    attack4_roles("fencing_v4victim")
    victim = psycopg.connect(user="fencing_v4victim", autocommit=True)
    try:
        q("CREATE TABLE first4 (id int PRIMARY KEY, v text, last_fencing_token bigint NOT NULL DEFAULT 0)",
          conn=victim)
        q("SELECT create_distributed_table('first4', 'id')", conn=victim)
        # Refused with a hint, changing nothing; the hint's step, then protect().
        e = expect_error("55000", "SELECT fencing.protect('first4')", conn=victim)
        assert "fencing_internal._citus_floors()" in (e.diag.message_hint or ""), e.diag.message_hint
        assert one("SELECT to_regnamespace('fencing_citus') IS NULL")
        q("SELECT fencing_internal._citus_floors()", conn=victim)
        q("SELECT fencing.protect('first4')", conn=victim)
        in_tx(5, "INSERT INTO first4 VALUES (1, 'a', 5)")
    finally:
        victim.close()
        q("DROP TABLE IF EXISTS first4")
        attack4_drop_roles("fencing_v4victim")


@test
def concurrent_sessions():
    """Isolation-style, through the coordinator: a lower token waits for a higher one's
    transaction and is then refused; a re-insert waits for the deleting transaction."""
    distributed("orders", rows=5)
    s1 = connect(autocommit=False)

    def race(first_token, first_sql, second_token, second_sql, end, expected):
        """s1 writes first_sql and holds its transaction; a second session runs
        second_sql, must wait, and after s1's end ('commit' or 'rollback') ends
        with `expected` ('ok' or a SQLSTATE)."""
        outcome = []

        def second():
            try:
                in_tx(second_token, second_sql)
                outcome.append("ok")
            except psycopg.Error as e:
                outcome.append(e.sqlstate)
        s1.execute(f"SET LOCAL fencing.token = {first_token}")
        s1.execute(first_sql)
        t = threading.Thread(target=second)
        t.start()
        time.sleep(1.0)
        assert t.is_alive(), f"{second_sql!r} did not wait for {first_sql!r}"
        s1.commit() if end == "commit" else s1.rollback()
        t.join(30)
        assert outcome == [expected], (second_sql, outcome, expected)

    # A lower token waits for the row and is refused once the higher one commits.
    race(20, "UPDATE orders SET v = 's1' WHERE id = 1", 19, "UPDATE orders SET v = 's2' WHERE id = 1",
         "commit", "23T01")
    # A re-insert waits for the deleting transaction, then sees its mark.
    race(30, "DELETE FROM orders WHERE id = 2", 29, "INSERT INTO orders VALUES (2, 'zombie')",
         "commit", "23T01")
    # If the higher one rolls back, the lower one goes through.
    race(40, "UPDATE orders SET v = 's1' WHERE id = 3", 35, "UPDATE orders SET v = 's2' WHERE id = 3",
         "rollback", "ok")
    s1.close()
    # Many writers at once on a few hot rows: tokens stored never go down.
    stop = time.time() + 5
    seen_errors = []

    def hammer(seed):
        import random
        r = random.Random(seed)
        with connect(autocommit=False) as c:
            while time.time() < stop:
                k, tok = r.randint(1, 5), r.randint(1, 10_000)
                try:
                    c.execute(f"SET LOCAL fencing.token = {tok}")
                    c.execute("UPDATE orders SET v = %s WHERE id = %s", (str(tok), k))
                    c.commit()
                except psycopg.Error as e:
                    c.rollback()
                    if e.sqlstate not in ("23T01", "40P01"):
                        seen_errors.append(e.sqlstate)
    threads = [threading.Thread(target=hammer, args=(i,)) for i in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not seen_errors, seen_errors
    for k, v, tok in q("SELECT id, v, last_fencing_token FROM orders WHERE id <= 5 AND v ~ '^[0-9]+$'"):
        assert int(v) == tok, (k, v, tok)  # the row holds the write of its own token


@test
def token_reaches_workers_everywhere():
    """Citus 14 propagates SET LOCAL only where it counts the statement as part
    of a multi-statement transaction: the workers must never check a write
    with a token other than the one the coordinator's session presents."""
    distributed("orders", rows=10)
    in_tx(50, "UPDATE orders SET v = 'at50' WHERE id BETWEEN 1 AND 10")
    q("""CREATE OR REPLACE FUNCTION pg_temp.w(tok text, k int) RETURNS void LANGUAGE plpgsql AS $$
         BEGIN PERFORM set_config('fencing.token', tok, true);
               UPDATE orders SET v = 'w' || tok WHERE id = k; END $$""")
    # Autocommit: a function that writes with 100 one level down (Citus
    # propagates there), then with a stale 5 at its own level (Citus does not).
    q("""CREATE OR REPLACE FUNCTION pg_temp.stale() RETURNS void LANGUAGE plpgsql AS $$
         BEGIN PERFORM pg_temp.w('100', 1);
               PERFORM set_config('fencing.token', '5', true);
               UPDATE orders SET v = 'stale' WHERE id = 2; END $$""")
    e = None
    try:
        q("SELECT pg_temp.stale()")
    except psycopg.Error as err:
        e = err
    assert e is not None and e.sqlstate in ("23T01", "23T02"), \
        ("stale token 5 accepted", e, q("SELECT id, v, last_fencing_token FROM orders WHERE id IN (1, 2)"))
    assert q("SELECT v, last_fencing_token FROM orders WHERE id = 2") == [("at50", 50)]
    # The same in a function called once, autocommit: own token, or refused, never another.
    q("""CREATE OR REPLACE FUNCTION pg_temp.once(tok text, k int) RETURNS void LANGUAGE plpgsql AS $$
         BEGIN PERFORM set_config('fencing.token', tok, true);
               UPDATE orders SET v = 'once' WHERE id = k; END $$""")
    try:
        q("SELECT pg_temp.once('60', 3)")
        assert token_of("orders", 3) == 60
    except psycopg.Error as err:
        assert err.sqlstate == "23T02", err
    # A trigger on a coordinator-local table writes the distributed table, autocommit.
    q("DROP TABLE IF EXISTS feed")
    q("CREATE TABLE feed (k int, tok text)")
    q("""CREATE OR REPLACE FUNCTION pg_temp.feed_trg() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN IF NEW.k = 4 THEN PERFORM pg_temp.w(NEW.tok, NEW.k);
               ELSE PERFORM set_config('fencing.token', NEW.tok, true);
                    UPDATE orders SET v = 'trg' WHERE id = NEW.k; END IF;
               RETURN NEW; END $$""")
    q("CREATE TRIGGER feed_trg BEFORE INSERT ON feed FOR EACH ROW EXECUTE FUNCTION pg_temp.feed_trg()")
    try:
        q("INSERT INTO feed VALUES (4, '200'), (5, '7')")
        raise AssertionError(("stale 7 accepted", q("SELECT id, v, last_fencing_token FROM orders WHERE id IN (4, 5)")))
    except psycopg.Error as err:
        assert err.sqlstate in ("23T01", "23T02"), err
    assert q("SELECT v, last_fencing_token FROM orders WHERE id = 5") == [("at50", 50)]
    # Prepared statements, MERGE, INSERT ... SELECT and COPY after a token change in a transaction.
    with connect(autocommit=False) as c:
        c.execute("PREPARE up(int) AS UPDATE orders SET v = 'prep' WHERE id = $1")
        c.execute("SET LOCAL fencing.token = 70")
        for _ in range(7):
            c.execute("EXECUTE up(6)")
        c.execute("SET LOCAL fencing.token = 60")
        expect_error("23T01", "EXECUTE up(6)", conn=c)
        c.rollback()
    for stmt in ("MERGE INTO orders o USING (SELECT id FROM orders WHERE id = 7) s ON o.id = s.id"
                 " WHEN MATCHED THEN UPDATE SET v = 'm'",
                 "INSERT INTO orders (id, v) SELECT id, 'ins' FROM orders WHERE id = 8"
                 " ON CONFLICT (id) DO UPDATE SET v = 'ins'"):
        with connect(autocommit=False) as c:
            c.execute("SET LOCAL fencing.token = 90")
            c.execute("UPDATE orders SET v = 'x' WHERE id = 9")
            c.execute("SET LOCAL fencing.token = 40")
            expect_error("23T01", stmt, conn=c)
            c.rollback()
    in_tx(80, "DELETE FROM orders WHERE id = 10")
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL fencing.token = 90")
        c.execute("UPDATE orders SET v = 'x' WHERE id = 9")
        c.execute("SET LOCAL fencing.token = 79")
        try:
            with c.cursor().copy("COPY orders (id, v) FROM STDIN") as cp:
                cp.write_row((10, "zombie"))
            raise AssertionError("stale COPY accepted")
        except psycopg.Error as err:
            # Citus reports a worker's error during COPY as its own (XX000), message kept.
            assert err.sqlstate in ("23T01", "XX000") and "stale fencing token 79" in str(err), err
        c.rollback()
    # Settings as they were after each write; a user's own propagate_set_commands kept and honoured.
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL fencing.token = 90")
        c.execute("UPDATE orders SET v = 'x' WHERE id = 9")
        assert c.execute("SHOW citus.propagate_set_commands").fetchone()[0] == "none"
        assert c.execute("SELECT current_setting('fencing.token')").fetchone()[0] == "90"
        c.execute("SET LOCAL citus.propagate_set_commands = 'local'")
        c.execute("SAVEPOINT s")
        c.execute("SET LOCAL fencing.token = 3")
        expect_error("23T01", "UPDATE orders SET v = 'stale' WHERE id = 9", conn=c)
        c.execute("ROLLBACK TO SAVEPOINT s")
        c.execute("UPDATE orders SET v = 'y' WHERE id BETWEEN 1 AND 9")
        assert c.execute("SHOW citus.propagate_set_commands").fetchone()[0] == "local"
        c.commit()
    assert token_of("orders", 9) == 90 and one("SHOW citus.propagate_set_commands") == "none"
    # A parallel query on the coordinator while a token is set.
    q("DROP TABLE IF EXISTS big")
    q("CREATE TABLE big AS SELECT g FROM generate_series(1, 1000) g")
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL fencing.token = 91")
        c.execute("UPDATE orders SET v = 'p' WHERE id = 9")
        c.execute("SET LOCAL fencing.token = 92")
        # force_parallel_mode before PostgreSQL 16, debug_parallel_query since.
        parallel = ("debug_parallel_query" if int(c.execute("SHOW server_version_num").fetchone()[0]) >= 160000
                    else "force_parallel_mode")
        c.execute(f"SET LOCAL {parallel} = on")
        assert c.execute("SELECT count(*) FROM big").fetchone()[0] == 1000
        c.rollback()
    # EXPLAIN (no ANALYZE) starts executors that never finish: the check that
    # the token does not change during a writing statement still holds after many.
    changing = ("WITH s AS (SELECT set_config('fencing.token', '94', true))"
                " UPDATE orders SET v = (SELECT 'e' FROM s) WHERE id = 1")
    tx_error("55000", 95, changing)
    with connect(autocommit=False) as c:
        c.execute("SET LOCAL fencing.token = 95")
        for _ in range(40):
            c.execute("EXPLAIN UPDATE orders SET v = 'e' WHERE id = 1")
        expect_error("55000", changing, conn=c)
        c.rollback()
    # Autocommit single statements with a session-level token: accepted with
    # that token (the multi-shard ones: Citus opens a transaction on the
    # workers) or refused (23T02), never checked with another token.
    with connect() as c:
        c.execute("SET fencing.token = 96")
        for stmt, keys in (("UPDATE orders SET v = 'ac' WHERE id = 1", [1]),
                           ("UPDATE orders SET v = 'ac' WHERE id BETWEEN 2 AND 9", list(range(2, 10)))):
            try:
                c.execute(stmt)
                outcome = "accepted"
                assert {token_of("orders", k) for k in keys} == {96}, stmt
            except psycopg.Error as err:
                assert err.sqlstate == "23T02", err
                outcome = "23T02"
            print(f"citus: autocommit {stmt!r} with a session token: {outcome}", flush=True)
    q("DROP TABLE feed, big")


def main():
    failed = 0
    only = os.environ.get("CITUS_TESTS", "").split()
    for fn in [f for f in TESTS if f.first] + [f for f in TESTS if not f.first]:
        if only and fn.__name__ not in only:
            continue
        name = PREFIX + fn.__name__
        if fn.nodes_needed > len(NODES):
            print(f"citus: {name} not run on a single node (it needs a second node)", flush=True)
            continue
        started = time.monotonic()
        try:
            fn()
            print(f"test {name} ... ok  ({time.monotonic() - started:.1f} s)", flush=True)
        except Exception:
            failed += 1
            traceback.print_exc()
            print(f"test {name} ... FAILED", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
