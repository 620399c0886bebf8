"""The Python client's conformance worker: reads the requests of
clients/conformance/PROTOCOL.md on stdin, one JSON object a line, and answers
each on stdout through the client's public API only.  `conformance_worker.py
aio` serves them with fencing.aio instead of the threaded client."""

import asyncio
import json
import sys

import psycopg

import fencing
import fencing.aio


class Worker:
    """The threaded client: one method per request, op_<name>."""

    def __init__(self):
        self.conn = None            # the work connection, for writes
        self.leases = {}            # resource -> Lease or SessionLease
        self.sessions = {}          # resource -> Session
        self.callbacks = 0

    def on_stale(self, error):
        self.callbacks += 1

    def connection(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = psycopg.connect("", autocommit=True)
        return self.conn

    def op_lease(self, resource, holder, ttl, wait=None):
        lease = fencing.Lease("", resource, holder=holder, ttl=ttl, wait=wait)
        lease.acquire()
        self.leases[resource] = lease
        return {"token": lease.token}

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

    def op_write(self, sql, resource=None, token=None):
        target = self.leases[resource] if resource is not None else token
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
        for resource in list(self.leases):
            if resource in self.leases:
                try:
                    self.op_release(resource)
                except Exception:
                    pass


class AsyncWorker(Worker):
    """fencing.aio: the same requests, awaited on one event loop."""

    async def connection(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = await psycopg.AsyncConnection.connect("", autocommit=True)
        return self.conn

    async def op_lease(self, resource, holder, ttl, wait=None):
        lease = fencing.aio.Lease("", resource, holder=holder, ttl=ttl, wait=wait)
        await lease.acquire()
        self.leases[resource] = lease
        return {"token": lease.token}

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

    async def op_write(self, sql, resource=None, token=None):
        target = self.leases[resource] if resource is not None else token
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
        for resource in list(self.leases):
            if resource in self.leases:
                try:
                    await self.op_release(resource)
                except Exception:
                    pass


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
        raise ValueError(f"unknown op {request.get('op')!r}")
    return method(**arguments)


ERROR_NAMES = [
    (fencing.StaleTokenError, "StaleToken"),
    (fencing.MissingTokenError, "MissingToken"),
    (fencing.LeaseLost, "LeaseLost"),
    (fencing.LeaseTimeout, "LeaseTimeout"),
    (fencing.LeaseAlreadyHeld, "LeaseAlreadyHeld"),
]


def failure(error):
    name = next((n for cls, n in ERROR_NAMES if isinstance(error, cls)), "Other")
    answer = {"ok": False, "error": name, "message": f"{type(error).__name__}: {error}".strip()}
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
    if sys.argv[1:] == ["aio"]:
        asyncio.run(serve_async())
    else:
        serve()
