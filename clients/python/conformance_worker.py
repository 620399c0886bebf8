"""The Python client's conformance worker: reads the requests of
clients/conformance/PROTOCOL.md on stdin, one JSON object a line, and answers
each on stdout through the client's public API only.  `conformance_worker.py
aio` serves them with fencing.aio instead of the threaded client."""

import asyncio
import json
import logging
import sys
import threading
import time

import psycopg

import fencing
import fencing.aio


class Worker:
    """The threaded client: one method per request, op_<name>."""

    ELECTION = fencing.Election

    def __init__(self):
        self.conn = None            # the work connection, for writes
        self.leases = {}            # resource -> Lease or SessionLease
        self.sessions = {}          # resource -> Session
        self.callbacks = 0
        self.pending = {}           # resource -> Acquisition (lease_async)
        self.elections = {}         # election -> Election
        self.events = {}            # election -> [event, ...]

    def on_stale(self, error):
        self.callbacks += 1

    def connection(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = psycopg.connect("", autocommit=True)
        return self.conn

    def op_lease(self, resource, ttl, holder=None, wait=None):
        lease = fencing.Lease("", resource, holder=holder, ttl=ttl, wait=wait_of(wait))
        lease.acquire()
        self.leases[resource] = lease
        return {"token": lease.token, "holder": lease.holder}

    def op_lease_async(self, resource, ttl, holder=None, wait=None):
        cancel = threading.Event()
        lease = fencing.Lease("", resource, holder=holder, ttl=ttl, wait=wait_of(wait), cancel=cancel)
        pending = {"lease": lease, "cancel": cancel, "done": threading.Event()}

        def acquire():
            try:
                lease.acquire()
                self.leases[resource] = lease
            except BaseException as e:
                pending["error"] = e
            finally:
                pending["done"].set()
        pending["thread"] = threading.Thread(target=acquire, daemon=True)
        self.pending[resource] = pending
        pending["thread"].start()
        return {}

    def op_await_lease(self, resource, timeout):
        pending = self.pending[resource]
        if not pending["done"].wait(timeout):
            raise Pending("pending")
        return outcome(pending)

    def op_cancel(self, resource):
        pending = self.pending.pop(resource)
        pending["cancel"].set()
        pending["thread"].join()
        return {"cancelled": isinstance(pending.get("error"), fencing.LeaseCancelled)}

    def op_do(self, resource, ttl, sql, hold, holder=None):
        @fencing.leased("{resource}", ttl=ttl, holder=holder)
        def work(resource, lease):
            with fencing.fenced(self.connection(), lease, on_stale=self.on_stale) as cur:
                cur.execute(sql)
                rows = cur.rowcount
            if lease.lost.wait(hold):
                raise fencing.LeaseLost(f"lease on {resource} lost during the hold")
            return {"token": lease.token, "rows": rows}
        return work(resource)

    def op_write_hold(self, resource, sql, hold):
        with fencing.fenced(self.connection(), self.leases[resource], on_stale=self.on_stale) as cur:
            cur.execute(sql)
            rows = cur.rowcount
            time.sleep(hold)
        return {"rows": rows}

    def election(self, election, candidate=None, ttl=2, recampaign=False):
        if election not in self.elections:
            events = self.events.setdefault(election, [])
            self.elections[election] = self.ELECTION(
                "", election, candidate, ttl=ttl, recampaign=recampaign,
                on_started_leading=lambda token: events.append(event("started", None, token)),
                on_stopped_leading=lambda: events.append(event("stopped", None, None)),
                on_new_leader=lambda holder, token: events.append(event("new_leader", holder, token)))
        return self.elections[election]

    def op_campaign(self, election, ttl, candidate=None, recampaign=False):
        chosen = self.election(election, candidate, ttl, recampaign)
        threading.Thread(target=quietly, args=(chosen.campaign,), daemon=True).start()
        return {"candidate": chosen.candidate}

    def op_election_status(self, election):
        return leadership(self.elections.get(election))

    def op_await_leader(self, election, timeout):
        chosen = self.elections.get(election)
        until = time.monotonic() + timeout
        while chosen is not None and not chosen.is_leader and time.monotonic() < until:
            time.sleep(0.02)       # the driver's question, not the client's wait
        return leadership(chosen)

    def op_observe(self, election):
        self.election(election).observe()
        return {}

    def op_events(self, election):
        return {"events": list(self.events.get(election, []))}

    def op_current_leader(self, election):
        found = self.election(election).leader()
        return {"holder": found[0] if found else None, "token": found[1] if found else None}

    def op_resign(self, election):
        chosen = self.elections.get(election)
        return {"resigned": bool(chosen) and chosen.resign()}

    def op_session(self, holder, ttl, resources):
        session = fencing.Session("", holder=holder)
        try:
            tokens = [session.lease(resource, ttl=ttl).token for resource in resources]
        except BaseException:
            session.close()
            raise
        self.keep_session(session)
        return {"tokens": tokens}

    def keep_session(self, session):
        for lease in session.leases:
            self.leases[lease.resource] = lease
            self.sessions[lease.resource] = session

    def op_status(self, resource):
        return status(self.leases[resource])

    def op_await_lost(self, resource, timeout):
        return {"lost": self.leases[resource].lost.wait(timeout)}

    def op_write(self, sql, resource=None, token=None, election=None):
        target = self.leases[resource] if resource is not None else token
        if election is not None:
            target = self.election(election)
        try:
            if target is None:
                with self.connection().transaction():
                    return {"rows": self.conn.execute(sql).rowcount}
            with fencing.fenced(self.connection(), target, on_stale=self.on_stale) as cur:
                cur.execute(sql)
                return {"rows": cur.rowcount}
        except psycopg.Error as e:
            mapped = fencing.translate(e)
            if mapped is e:
                raise
            raise mapped from e

    def op_release(self, resource):
        session = self.sessions.get(resource)
        if session is None:
            return {"released": self.leases.pop(resource).release()}
        held = self.forget_session(session)
        released = [session.release(lease.resource) for lease in held]
        session.close()
        return {"released": bool(held) and all(released)}

    def forget_session(self, session):
        held = session.leases
        for lease in held:
            self.leases.pop(lease.resource, None)
            self.sessions.pop(lease.resource, None)
        return held

    def op_raise_inside(self, resource, holder, ttl):
        token = None
        try:
            with fencing.Lease("", resource, holder=holder, ttl=ttl) as lease:
                token = lease.token
                raise RuntimeError("raised inside the lease")
        except RuntimeError:
            pass
        return {"token": token}

    def op_stale_count(self):
        return {"count": fencing.stale_refusals(), "callbacks": self.callbacks}

    def handle(self, request):
        return call(self, request)

    def release_all(self):
        for pending in self.pending.values():
            pending["cancel"].set()
        for chosen in self.elections.values():
            quietly(chosen.close)
        for resource in list(self.leases):
            if resource in self.leases:
                quietly(self.op_release, resource)


class AsyncWorker(Worker):
    """fencing.aio: the same requests, awaited on one event loop."""

    ELECTION = fencing.aio.Election

    def __init__(self):
        super().__init__()
        self.tasks = set()

    async def connection(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = await psycopg.AsyncConnection.connect("", autocommit=True)
        return self.conn

    async def op_lease(self, resource, ttl, holder=None, wait=None):
        lease = fencing.aio.Lease("", resource, holder=holder, ttl=ttl, wait=wait_of(wait))
        await lease.acquire()
        self.leases[resource] = lease
        return {"token": lease.token, "holder": lease.holder}

    async def op_lease_async(self, resource, ttl, holder=None, wait=None):
        lease = fencing.aio.Lease("", resource, holder=holder, ttl=ttl, wait=wait_of(wait))
        pending = {"lease": lease}

        async def acquire():
            await lease.acquire()
            self.leases[resource] = lease
        pending["task"] = asyncio.get_running_loop().create_task(acquire())
        self.pending[resource] = pending
        return {}

    async def op_await_lease(self, resource, timeout):
        pending = self.pending[resource]
        await asyncio.wait([pending["task"]], timeout=timeout)
        if not pending["task"].done():
            raise Pending("pending")
        if pending["task"].exception() is not None:
            pending["error"] = pending["task"].exception()
        return outcome(pending)

    async def op_cancel(self, resource):
        task = self.pending.pop(resource)["task"]
        task.cancel()
        await asyncio.wait([task])
        return {"cancelled": task.cancelled()}

    async def op_do(self, resource, ttl, sql, hold, holder=None):
        @fencing.leased("{resource}", ttl=ttl, holder=holder)
        async def work(resource, lease):
            async with fencing.aio.fenced(await self.connection(), lease, on_stale=self.on_stale) as cur:
                await cur.execute(sql)
                rows = cur.rowcount
            try:
                await asyncio.wait_for(lease.lost.wait(), hold)
                raise fencing.LeaseLost(f"lease on {resource} lost during the hold")
            except asyncio.TimeoutError:
                pass
            return {"token": lease.token, "rows": rows}
        return await work(resource)

    async def op_write_hold(self, resource, sql, hold):
        async with fencing.aio.fenced(await self.connection(), self.leases[resource],
                                      on_stale=self.on_stale) as cur:
            await cur.execute(sql)
            rows = cur.rowcount
            await asyncio.sleep(hold)
        return {"rows": rows}

    async def op_campaign(self, election, ttl, candidate=None, recampaign=False):
        chosen = self.election(election, candidate, ttl, recampaign)
        self.tasks.add(asyncio.get_running_loop().create_task(quietly_async(chosen.campaign)))
        return {"candidate": chosen.candidate}

    async def op_await_leader(self, election, timeout):
        chosen = self.elections.get(election)
        until = time.monotonic() + timeout
        while chosen is not None and not chosen.is_leader and time.monotonic() < until:
            await asyncio.sleep(0.02)
        return leadership(chosen)

    async def op_observe(self, election):
        await self.election(election).observe()
        return {}

    async def op_current_leader(self, election):
        found = await self.election(election).leader()
        return {"holder": found[0] if found else None, "token": found[1] if found else None}

    async def op_resign(self, election):
        chosen = self.elections.get(election)
        return {"resigned": bool(chosen) and await chosen.resign()}

    async def op_session(self, holder, ttl, resources):
        session = fencing.aio.Session("", holder=holder)
        try:
            tokens = [(await session.lease(resource, ttl=ttl)).token for resource in resources]
        except BaseException:
            await session.close()
            raise
        self.keep_session(session)
        return {"tokens": tokens}

    async def op_await_lost(self, resource, timeout):
        try:
            await asyncio.wait_for(self.leases[resource].lost.wait(), timeout)
        except asyncio.TimeoutError:
            pass
        return {"lost": self.leases[resource].lost.is_set()}

    async def op_write(self, sql, resource=None, token=None, election=None):
        target = self.leases[resource] if resource is not None else token
        if election is not None:
            target = self.election(election)
        conn = await self.connection()
        try:
            if target is None:
                async with conn.transaction():
                    return {"rows": (await conn.execute(sql)).rowcount}
            async with fencing.aio.fenced(conn, target, on_stale=self.on_stale) as cur:
                await cur.execute(sql)
                return {"rows": cur.rowcount}
        except psycopg.Error as e:
            mapped = fencing.translate(e)
            if mapped is e:
                raise
            raise mapped from e

    async def op_release(self, resource):
        session = self.sessions.get(resource)
        if session is None:
            return {"released": await self.leases.pop(resource).release()}
        held = self.forget_session(session)
        released = [await session.release(lease.resource) for lease in held]
        await session.close()
        return {"released": bool(held) and all(released)}

    async def op_raise_inside(self, resource, holder, ttl):
        token = None
        try:
            async with fencing.aio.Lease("", resource, holder=holder, ttl=ttl) as lease:
                token = lease.token
                raise RuntimeError("raised inside the lease")
        except RuntimeError:
            pass
        return {"token": token}

    async def handle(self, request):
        answer = call(self, request)
        return await answer if asyncio.iscoroutine(answer) else answer

    async def release_all(self):
        for pending in self.pending.values():
            pending["task"].cancel()
        for chosen in self.elections.values():
            await quietly_async(chosen.close)
        for resource in list(self.leases):
            if resource in self.leases:
                try:
                    await self.op_release(resource)
                except Exception:
                    pass


class Pending(Exception):
    """await_lease: the acquisition still waits."""


class UnknownOp(ValueError):
    """A request this worker does not implement."""


def wait_of(wait):
    return fencing.FOREVER if wait == "forever" else wait


def outcome(pending):
    if pending.get("error") is not None:
        raise pending["error"]
    return {"token": pending["lease"].token, "holder": pending["lease"].holder}


def event(kind, holder, token):
    return {"kind": kind, "holder": holder, "token": token}


def leadership(election):
    leads = election is not None and election.is_leader
    return {"leader": leads, "token": election.token if leads else None}


def quietly(function, *args):
    try:
        function(*args)
    except Exception as e:
        print(f"conformance worker: {function.__qualname__}: {e}", file=sys.stderr)


async def quietly_async(function, *args):
    try:
        await function(*args)
    except Exception as e:
        print(f"conformance worker: {function.__qualname__}: {e}", file=sys.stderr)


def status(lease):
    lost = lease.lost.is_set()
    if not lost:
        try:
            lease.check()          # reads the clock
        except fencing.LeaseLost:
            lost = True
    return {"token": lease.token, "lost": lost, "remaining": lease.remaining()}


def call(worker, request):
    arguments = {k: v for k, v in request.items() if k != "op"}
    method = getattr(worker, "op_" + str(request.get("op")), None)
    if method is None:
        raise UnknownOp(f"unknown op {request.get('op')}")
    return method(**arguments)


ERROR_NAMES = [
    (fencing.StaleTokenError, "StaleToken"),
    (fencing.MissingTokenError, "MissingToken"),
    (fencing.LeaseLost, "LeaseLost"),
    (fencing.LeaseBusy, "LeaseBusy"),
    (fencing.LeaseTimeout, "LeaseTimeout"),
    (fencing.LeaseAlreadyHeld, "LeaseAlreadyHeld"),
]


def failure(error):
    name = next((n for cls, n in ERROR_NAMES if isinstance(error, cls)), "Other")
    text = str(error) if isinstance(error, (Pending, UnknownOp)) else f"{type(error).__name__}: {error}".strip()
    answer = {"ok": False, "error": name, "message": text}
    if isinstance(error, fencing.RefusedWriteError):
        answer.update(table=error.table, column=error.column, constraint=error.constraint,
                      key=error.key, presented=error.presented, stored=error.stored)
    return answer


def answer(reply):
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()


def serve():
    worker = Worker()
    request = {}
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("op") == "quit":
            break
        try:
            answer(dict(ok=True, **worker.handle(request)))
        except Exception as e:     # every failure is an answer
            answer(failure(e))
    worker.release_all()
    if request.get("op") == "quit":
        answer({"ok": True})


async def serve_async():
    worker = AsyncWorker()
    loop = asyncio.get_running_loop()
    request = {}
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        if not line:
            break
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("op") == "quit":
            break
        try:
            answer(dict(ok=True, **(await worker.handle(request))))
        except Exception as e:
            answer(failure(e))
    await worker.release_all()
    if request.get("op") == "quit":
        answer({"ok": True})


if __name__ == "__main__":
    # the client's loss line (logger "fencing", WARNING) on stderr
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if sys.argv[1:] == ["aio"]:
        asyncio.run(serve_async())
    else:
        serve()
