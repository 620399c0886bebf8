"""fencing.celery with real prefork workers: a redis-server on loopback (a
private port, stopped on exit, also on failure) as broker and result
backend, two `celery worker -P prefork` processes (celery_app.py) and the
server of test_server.py.  Worker 1 takes a task's lease and is frozen
(SIGSTOP, its pool process and keepalive thread too) past the TTL; worker
2's task on the same key takes over with a higher token and pays; worker 1,
thawed, writes with its old token: refused, dead-lettered (the
record_dead_letter task), not retried; no task lost."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import psycopg
import pytest

celery = pytest.importorskip("celery")   # clients/run installs celery-requirements.txt

from test_server import conn   # noqa: E402,F401  (its fixture: a protected table)

HERE = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 60


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def until(what, check, timeout=TIMEOUT, every=0.1):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(every)


def stop(process, sig=signal.SIGTERM):
    """Ends a process group started here (thawed first), killed if it lingers."""
    if process.poll() is not None:
        return
    for s in (signal.SIGCONT, sig):
        try:
            os.killpg(process.pid, s)
        except ProcessLookupError:
            return
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@pytest.fixture(scope="module")
def redis_url():
    server = shutil.which("redis-server") or pytest.fail("redis-server is not installed "
                                                         "(clients/run installs it)")
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="fencing-celery-redis.")
    process = subprocess.Popen([server, "--bind", "127.0.0.1", "--port", str(port), "--save", "",
                                "--appendonly", "no", "--dir", workdir],
                               stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        def answers():
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"PING\r\n")
                    return s.recv(16).startswith(b"+PONG")
            except OSError:
                return False
        until("redis-server", answers, timeout=20)
        os.environ["FENCING_TEST_REDIS"] = f"redis://127.0.0.1:{port}"    # before celery_app is imported
        yield os.environ["FENCING_TEST_REDIS"]
    finally:
        stop(process)
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture(scope="module")
def db(redis_url, conn):
    """test_server's connection and protected table, and the tables of the runs and dead letters."""
    import celery_app as tasks
    conn.execute(f"DROP TABLE IF EXISTS {tasks.RUNS}, {tasks.LETTERS}")
    conn.execute(f"CREATE TABLE {tasks.RUNS} (task_id text, task text, order_id int, pid int, "
                 "holder text, token bigint, retries int, at timestamptz DEFAULT clock_timestamp())")
    conn.execute(f"CREATE TABLE {tasks.LETTERS} (task_id text, letter jsonb)")
    yield conn
    conn.execute(f"DROP TABLE {tasks.RUNS}, {tasks.LETTERS}")


@pytest.fixture(scope="module")
def workers(redis_url, db):
    """(app, {name: process}): worker w1 on queue q1, w2 on q2 and dead."""
    import celery_app as tasks
    assert tasks.REDIS == redis_url
    env = dict(os.environ, PYTHONPATH=HERE)
    logs = tempfile.mkdtemp(prefix="fencing-celery-logs.")
    started = {}
    try:
        for name, queues in (("w1", "q1"), ("w2", "q2,dead")):
            log = open(os.path.join(logs, f"{name}.log"), "w")
            started[name] = subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "celery_app", "worker", "-P", "prefork",
                 "-c", "1", "-n", f"{name}@%h", "-Q", queues, "-l", "info",
                 "--without-gossip", "--without-mingle", "--without-heartbeat"],
                cwd=HERE, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        names = {f"{name}@{socket.gethostname()}" for name in started}

        def ready():
            for name, process in started.items():
                if process.poll() is not None:
                    raise AssertionError(f"worker {name} ended: " + open(os.path.join(logs, f"{name}.log")).read())
            return names <= {n for reply in tasks.app.control.ping(timeout=0.5) for n in reply}
        until("both workers", ready, timeout=TIMEOUT, every=0.5)
        yield tasks, started
    except BaseException:
        for name in started:
            sys.stderr.write(f"--- {name}.log\n" + open(os.path.join(logs, f"{name}.log")).read())
        raise
    finally:
        for process in started.values():
            stop(process)
        shutil.rmtree(logs, ignore_errors=True)


def runs(db, tasks, task_id):
    return db.execute(f"SELECT pid, holder, token, retries, extract(epoch FROM at) FROM {tasks.RUNS} "
                      "WHERE task_id = %s ORDER BY at", (task_id,)).fetchall()


def order(db, tasks, order_id):
    return db.execute(f"SELECT status, last_fencing_token FROM {tasks.ORDERS} WHERE id = %s",
                      (order_id,)).fetchone()


def pool_pids(process):
    """The worker's processes: its main one and its pool's."""
    out = subprocess.run(["ps", "-o", "pid=", "--sid", str(process.pid)], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


def test_a_frozen_worker_is_taken_over_and_its_write_dead_lettered(workers, db):
    tasks, started = workers
    a = tasks.pay.apply_async((11, "paid by A"), {"hold": 1.5}, queue="q1")
    [(pid_a, holder_a, token_a, _, at_a)] = until("A's run", lambda: runs(db, tasks, a.id))
    os.killpg(started["w1"].pid, signal.SIGSTOP)          # the whole worker, A's keepalive too
    frozen = time.monotonic()
    try:
        assert pid_a in pool_pids(started["w1"]) and pid_a != started["w1"].pid   # a pool process
        b = tasks.pay.apply_async((11, "paid by B"), queue="q2")
        token_b = b.get(timeout=TIMEOUT)
        took_over = time.monotonic() - frozen
        [(pid_b, holder_b, run_token_b, _, at_b)] = runs(db, tasks, b.id)
        assert run_token_b == token_b > token_a
        assert pid_b in pool_pids(started["w2"])
        assert holder_a != holder_b and holder_a.split(":")[:2] == [socket.gethostname(), str(pid_a)]
        assert holder_b.split(":")[:2] == [socket.gethostname(), str(pid_b)]
        # B was granted when A's lease expired (A renews at ttl/3: at most one renewal before the freeze)
        assert float(at_b - at_a) > tasks.TTL - 0.5, f"B granted {at_b - at_a:.2f} s after A"
        assert took_over < 2 * tasks.TTL + 3, f"took over after {took_over:.1f} s"
        assert order(db, tasks, 11) == ("paid by B", token_b)
        time.sleep(max(0.0, frozen + tasks.TTL + 0.5 - time.monotonic()))    # frozen past the TTL
    finally:
        os.killpg(started["w1"].pid, signal.SIGCONT)
    [(task_id, letter)] = until("A's dead letter", lambda: db.execute(
        f"SELECT task_id, letter FROM {tasks.LETTERS}").fetchall())
    assert task_id == a.id
    assert (letter["task"], letter["args"], letter["kwargs"]) == ("celery_app.pay", [11, "paid by A"],
                                                                   {"hold": 1.5})
    assert (letter["resource"], letter["holder"], letter["token"]) == ("celery-test:order:11", holder_a, token_a)
    assert (letter["presented"], letter["stored"], letter["table"]) == (token_a, token_b, tasks.ORDERS)
    with pytest.raises(celery.exceptions.Reject, match=f"stale token {token_a} on celery-test:order:11"):
        a.get(timeout=10)                       # Reject(requeue=False): FAILURE, not RETRY
    assert order(db, tasks, 11) == ("paid by B", token_b)
    time.sleep(2)         # pay's autoretry countdown is 1 s: a retry of A would have run by now
    assert len(runs(db, tasks, a.id)) == 1 and len(runs(db, tasks, b.id)) == 1
    assert b.state == "SUCCESS"                 # no task lost: one paid, one dead-lettered
    assert db.execute("SELECT count(*) FROM fencing.leases WHERE resource = 'celery-test:order:11' "
                      "AND live").fetchone()[0] == 0


def test_a_busy_lease_is_retried_or_skipped(workers, db):
    tasks, started = workers
    holder = tasks.pay.apply_async((12, "paid by holder"), {"hold": 2.0}, queue="q1")
    until("the holder's run", lambda: runs(db, tasks, holder.id))
    skipped = tasks.pay_or_skip.apply_async((12, "paid by skipper"), queue="q2")
    assert skipped.get(timeout=TIMEOUT) is None and runs(db, tasks, skipped.id) == []
    retried = tasks.pay_or_retry.apply_async((12, "paid by retrier"), queue="q2")
    token_holder = holder.get(timeout=TIMEOUT)
    token_retried = retried.get(timeout=TIMEOUT)
    [(_, _, token, retries, _)] = runs(db, tasks, retried.id)
    assert token == token_retried > token_holder and retries >= 1
    assert order(db, tasks, 12) == ("paid by retrier", token_retried)
