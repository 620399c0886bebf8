"""The Celery application of test_celery_worker.py, which starts its
workers (`celery -A celery_app worker`, prefork).  Broker and result
backend: the test's redis-server (FENCING_TEST_REDIS, redis://127.0.0.1:PORT);
the database: PGHOST, PGPORT, PGUSER, PGDATABASE.  Every run of a task
records itself (task id, pid, holder, token, retries) in RUNS."""

import os
import time

import psycopg
from celery import Celery
from psycopg.types.json import Jsonb

import fencing
from fencing.celery import FencedTask

REDIS = os.environ.get("FENCING_TEST_REDIS", "redis://127.0.0.1:6379")
ORDERS = "pytest_fencing_orders"     # test_server.py's table, its rows 1 to 20
RUNS = "pytest_celery_runs"
LETTERS = "pytest_celery_dead_letters"
TTL = 3

app = Celery("celery_app", broker=f"{REDIS}/0", backend=f"{REDIS}/1")
app.conf.update(
    task_acks_late=True,                 # a message is done when its task is
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    task_routes={"celery_app.record_dead_letter": {"queue": "dead"}},
    fencing_conninfo="",                 # libpq's environment
)


def record(task, order_id):
    request = task.request
    with psycopg.connect("", autocommit=True) as conn:
        conn.execute(f"INSERT INTO {RUNS} VALUES (%s, %s, %s, %s, %s, %s, %s)",
                     (request.id, task.name, order_id, os.getpid(), request.fencing_lease.holder,
                      request.fencing_token, request.retries))


def pay_with(token, order_id, status):
    with psycopg.connect("", autocommit=True) as conn, fencing.fenced(conn, token) as cur:
        cur.execute(f"UPDATE {ORDERS} SET status = %s WHERE id = %s", (status, order_id))


@app.task(bind=True, base=FencedTask, fencing_key="celery-test:order:{order_id}", fencing_ttl=TTL,
          fencing_wait=20, fencing_dead_letter="celery_app.record_dead_letter",
          autoretry_for=(Exception,), retry_kwargs={"countdown": 1, "max_retries": 3})
def pay(self, order_id, status, hold=0.0):
    """Pays after `hold` seconds (a frozen worker's pause falls in it) with
    the token as it was given (a worker that does not check its lease), so
    that the storage decides; retried on any error but a stale refusal."""
    record(self, order_id)
    time.sleep(hold)
    pay_with(self.request.fencing_token, order_id, status)
    return self.request.fencing_token


@app.task(bind=True, base=FencedTask, fencing_key="celery-test:order:{order_id}", fencing_ttl=TTL,
          fencing_retry_delay=0.5, max_retries=30)
def pay_or_retry(self, order_id, status):
    record(self, order_id)
    pay_with(self.request.fencing_lease, order_id, status)
    return self.request.fencing_token


@app.task(bind=True, base=FencedTask, fencing_key="celery-test:order:{order_id}", fencing_ttl=TTL,
          fencing_busy="skip")
def pay_or_skip(self, order_id, status):
    record(self, order_id)
    pay_with(self.request.fencing_lease, order_id, status)
    return self.request.fencing_token


@app.task
def record_dead_letter(letter):
    with psycopg.connect("", autocommit=True) as conn:
        conn.execute(f"INSERT INTO {LETTERS} VALUES (%s, %s)", (letter["id"], Jsonb(letter)))
