"""fencing.celery without a worker: the key's formatting, the options'
checks (at the task's definition), the holder, and (with a server, as
test_server.py finds it) runs of tasks in-process with Task.apply(): the
lease held while the body runs, a stale refusal dead-lettered and never
retried, a busy lease skipped or retried.  test_celery_worker.py runs real
prefork workers."""

import os
import re
import subprocess
import sys
from datetime import timedelta

import psycopg
import pytest

celery = pytest.importorskip("celery")   # clients/run installs celery-requirements.txt

import fencing                # noqa: E402
import fencing.celery         # noqa: E402
from fencing.celery import FencedTask, default_holder   # noqa: E402
from test_server import TABLE, conn   # noqa: E402,F401  (its fixture: a protected table)

app = celery.Celery("fencing_unit", broker="memory://", backend="cache+memory://")
app.conf.fencing_conninfo = ""


def define(key="order:{order_id}", **options):
    """A task `pay(order_id, note="n")` with these options, defined now."""
    def pay(self, order_id, note="n"):
        return self.request.fencing_token
    pay.__name__ = f"pay_{define.count}"
    define.count += 1
    task = app.task(bind=True, base=FencedTask, fencing_key=key, **options)(pay)
    task.name               # the proxy's evaluation: the class is created here
    return task


define.count = 0


def test_the_key_is_formatted_with_the_bound_arguments():
    task = define("order:{order_id}:{note}")
    assert task.fencing_resource(101) == "order:101:n"
    assert task.fencing_resource(order_id=7, note="x") == "order:7:x"
    assert task.fencing_resource(7, "y") == "order:7:y"
    assert define("job:{order_id[id]}.{order_id.__class__.__name__}").fencing_resource({"id": 3}) == "job:3.dict"
    assert define("singleton").fencing_resource(1) == "singleton"

    @app.task(base=FencedTask, fencing_key="tenant:{tenant}:{order_id}")
    def loose(order_id, **extra):
        pass
    assert loose.fencing_resource(5, tenant="acme") == "tenant:acme:5"
    with pytest.raises(ValueError, match=r"cannot be formatted.*'tenant'"):
        loose.fencing_resource(5)


def test_a_call_that_misses_the_key_fails_before_any_lease(monkeypatch):
    def no_lease(*args, **kwargs):
        raise AssertionError("a lease was taken")
    monkeypatch.setattr(fencing.celery, "Lease", no_lease)
    task = define("order:{order_id}")
    with pytest.raises(TypeError, match=r"fencing_key 'order:\{order_id\}'.*missing a required argument: 'order_id'"):
        task()
    with pytest.raises(TypeError, match="unexpected keyword argument 'id'"):
        task(1, id=3)
    with pytest.raises(TypeError, match="too many positional arguments"):
        task(1, 2, 3)
    with pytest.raises(ValueError, match="is empty for this call"):
        define("{note}")(1, note="")
    result = task.apply(kwargs={"note": "x"})        # as a worker runs it: a failed task
    assert result.state == "FAILURE" and isinstance(result.result, TypeError)


@pytest.mark.parametrize("key, options, message", [
    (None, {}, "fencing_key .* is required"),
    ("", {}, "fencing_key .* is required"),
    (42, {}, "fencing_key .* is required"),
    ("order:{id}", {}, r"names id, which is not an argument of the task \(note, order_id\)"),
    ("order:{0}", {}, "not positions"),
    ("order:{}", {}, "not positions"),
    ("order:{order_id}", {"fencing_ttl": 0}, "fencing_ttl must be a positive number"),
    ("order:{order_id}", {"fencing_ttl": -1}, "fencing_ttl must be a positive number"),
    ("order:{order_id}", {"fencing_ttl": "30"}, "fencing_ttl must be a positive number"),
    ("order:{order_id}", {"fencing_ttl": True}, "fencing_ttl must be a positive number"),
    ("order:{order_id}", {"fencing_wait": 0}, "fencing_wait must be a positive number"),
    ("order:{order_id}", {"fencing_retry_delay": -2}, "fencing_retry_delay must be"),
    ("order:{order_id}", {"fencing_busy": "wait"}, 'fencing_busy must be "retry" or "skip"'),
    ("order:{order_id}", {"fencing_dead_letter": 42}, "fencing_dead_letter must be"),
    ("order:{order_id}", {"fencing_holder": 7}, "fencing_holder must be a string"),
    ("order:{order_id}", {"fencing_conninfo": {"host": "db"}}, "fencing_conninfo must be a string"),
])
def test_bad_options_fail_at_the_definition(key, options, message):
    with pytest.raises(ValueError, match=message):
        define(key, **options)


def test_seconds_as_timedelta():
    task = define(fencing_ttl=timedelta(seconds=12), fencing_wait=timedelta(milliseconds=1500))
    assert (task.fencing_ttl, task.fencing_wait) == (12.0, 1.5)


def test_the_default_holder_is_host_pid_random(monkeypatch):
    first, second = default_holder(), default_holder()
    assert re.fullmatch(rf"[^:]+:{os.getpid()}:[0-9a-f]{{8}}", first)
    assert first != second
    monkeypatch.setattr(fencing._core.socket, "gethostname", lambda: "h" * 80 + ".example.org")
    long = default_holder()
    assert len(long.encode()) == 45 and long.startswith("hhh")


def test_without_celery_the_import_says_what_to_install():
    result = subprocess.run([sys.executable, "-c", "import sys; sys.modules['celery'] = None; "
                             "import fencing; import fencing.celery"], capture_output=True, text=True)
    assert result.returncode == 1
    assert "ImportError: fencing.celery needs Celery 5, the client's extra celery" in result.stderr


# -- runs in-process against a server ------------------------------------

def lease_row(conn, resource):
    return conn.execute("SELECT holder, token, live FROM fencing.leases WHERE resource = %s",
                        (resource,)).fetchone()


runs = []
letters = []


@app.task(bind=True, base=FencedTask, fencing_key="celery-unit:order:{order_id}", fencing_ttl=5,
          fencing_dead_letter=letters.append, autoretry_for=(Exception,), max_retries=3,
          retry_kwargs={"countdown": 0})
def pay(self, order_id, token=None):
    """Pays with the lease, or with `token` (an older holder's)."""
    conn = psycopg.connect("", autocommit=True)
    runs.append((self.request.fencing_resource, self.request.fencing_token,
                 lease_row(conn, self.request.fencing_resource)))
    with conn, fencing.fenced(conn, token or self.request.fencing_lease) as cur:
        cur.execute(f"UPDATE {TABLE} SET status = 'paid' WHERE id = %s", (order_id,))
    return self.request.fencing_token


@app.task(base=FencedTask, fencing_key="celery-unit:order:{order_id}", fencing_busy="skip")
def pay_or_skip(order_id):
    runs.append(order_id)
    return "ran"


@app.task(bind=True, base=FencedTask, fencing_key="celery-unit:order:{order_id}", max_retries=2)
def pay_or_retry(self, order_id):
    runs.append(order_id)
    return "ran"


def test_the_body_runs_under_the_lease_and_it_is_released(conn):
    runs.clear()
    result = pay.apply((1,))
    assert result.state == "SUCCESS", result.traceback
    token = result.result
    [(resource, seen, row)] = runs
    assert resource == "celery-unit:order:1" and seen == token
    assert row[1:] == (token, True) and re.fullmatch(r".+:\d+:[0-9a-f]{8}", row[0])
    assert conn.execute(f"SELECT last_fencing_token FROM {TABLE} WHERE id = 1").fetchone()[0] == token
    assert lease_row(conn, resource)[2] is False          # released


def test_a_stale_refusal_is_dead_lettered_not_retried(conn):
    first = pay.apply((2,)).result
    runs.clear()
    letters.clear()
    result = pay.apply((2,), {"token": first - 1})      # autoretry_for=(Exception,) all the same
    assert result.state == "REJECTED"
    assert len(runs) == 1                               # ran once: not retried
    [letter] = letters
    assert letter["task"] == pay.name and letter["args"] == [2] and letter["kwargs"] == {"token": first - 1}
    assert letter["resource"] == "celery-unit:order:2" and letter["token"] == runs[0][1]
    assert (letter["presented"], letter["stored"], letter["table"]) == (first - 1, first, TABLE)
    assert conn.execute(f"SELECT last_fencing_token FROM {TABLE} WHERE id = 2").fetchone()[0] == first
    assert lease_row(conn, "celery-unit:order:2")[2] is False


def test_a_busy_lease_is_skipped_or_retried(conn):
    runs.clear()
    with fencing.Lease("", "celery-unit:order:3", holder="someone-else", ttl=10):
        skipped = pay_or_skip.apply((3,))
        assert (skipped.state, skipped.result) == ("SUCCESS", None)
        retried = pay_or_retry.apply((3,))               # eagerly: retried at once, twice
        assert retried.state == "FAILURE"
        assert isinstance(retried.result, fencing.celery.BUSY)
        assert runs == []
    assert pay_or_skip.apply((3,)).result == "ran" and runs == [3]


@app.task(bind=True, base=FencedTask, fencing_key="celery-unit:order:{order_id}", fencing_ttl=1.5,
          fencing_dead_letter=letters.append, autoretry_for=(fencing.LeaseLost,), max_retries=1,
          retry_kwargs={"countdown": 0})
def pay_after_a_loss(self, order_id):
    """Loses its lease (released behind its back: the next renewal is refused), then writes."""
    lease = self.request.fencing_lease
    runs.append(lease.token)
    with psycopg.connect("", autocommit=True) as conn:
        conn.execute("SELECT fencing.release(%s, %s, %s)", (lease.resource, lease.holder, lease.token))
        assert lease.lost.wait(3)
        with fencing.fenced(conn, lease) as cur:
            cur.execute(f"UPDATE {TABLE} SET status = 'lost' WHERE id = %s", (order_id,))


def test_a_lost_lease_is_an_ordinary_failure(conn):
    runs.clear()
    letters.clear()
    result = pay_after_a_loss.apply((4,))
    assert result.state == "FAILURE" and isinstance(result.result, fencing.LeaseLost)
    assert len(runs) == 2 and runs[0] != runs[1]         # autoretry_for retried it, under a new lease
    assert letters == []
    assert conn.execute(f"SELECT status, last_fencing_token FROM {TABLE} WHERE id = 4").fetchone() == ("new", 1)
