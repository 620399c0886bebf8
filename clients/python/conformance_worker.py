"""The Python client's conformance worker: reads the requests of
clients/conformance/PROTOCOL.md on stdin, one JSON object a line, and answers
each on stdout through the client's public API only."""

import json
import sys

import psycopg

import fencing


class Worker:
    def __init__(self):
        self.conn = None            # the work connection, for writes
        self.leases = {}            # resource -> Lease or SessionLease
        self.sessions = {}          # resource -> Session
        self.callbacks = 0

    def connection(self):
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = psycopg.connect("", autocommit=True)
        return self.conn

    def on_stale(self, error):
        self.callbacks += 1

    def handle(self, request):
        op = request["op"]
        if op == "lease":
            lease = fencing.Lease("", request["resource"], holder=request["holder"],
                                  ttl=request["ttl"], wait=request.get("wait"))
            lease.acquire()
            self.leases[request["resource"]] = lease
            return {"token": lease.token}
        if op == "session":
            session = fencing.Session("", holder=request["holder"])
            tokens = []
            try:
                for resource in request["resources"]:
                    lease = session.lease(resource, ttl=request["ttl"])
                    tokens.append(lease.token)
            except BaseException:
                session.close()
                raise
            for lease in session.leases:
                self.leases[lease.resource] = lease
                self.sessions[lease.resource] = session
            return {"tokens": tokens}
        if op == "status":
            lease = self.leases[request["resource"]]
            lost = lease.lost.is_set()
            if not lost:
                try:
                    lease.check()
                except fencing.LeaseLost:
                    lost = True
            return {"token": lease.token, "lost": lost, "remaining": lease.remaining()}
        if op == "await_lost":
            return {"lost": self.leases[request["resource"]].lost.wait(request["timeout"])}
        if op == "write":
            if "resource" in request:
                target = self.leases[request["resource"]]
            elif "token" in request:
                target = request["token"]
            else:
                return self.plain_write(request["sql"])
            try:
                with fencing.fenced(self.connection(), target, on_stale=self.on_stale) as cur:
                    cur.execute(request["sql"])
                    return {"rows": cur.rowcount}
            except psycopg.OperationalError:
                self.conn = None
                raise
        if op == "release":
            resource = request["resource"]
            session = self.sessions.get(resource)
            if session is not None:
                held = [lease for lease in session.leases]
                released = all([session.release(lease.resource) for lease in held]) and bool(held)
                session.close()
                for lease in held:
                    self.leases.pop(lease.resource, None)
                    self.sessions.pop(lease.resource, None)
                return {"released": released}
            return {"released": self.leases.pop(resource).release()}
        if op == "raise_inside":
            token = None
            try:
                with fencing.Lease("", request["resource"], holder=request["holder"],
                                   ttl=request["ttl"]) as lease:
                    token = lease.token
                    raise RuntimeError("raised inside the lease")
            except RuntimeError:
                pass
            return {"token": token}
        if op == "stale_count":
            return {"count": fencing.stale_refusals(), "callbacks": self.callbacks}
        raise ValueError(f"unknown op {op!r}")

    def plain_write(self, sql):
        conn = self.connection()
        try:
            with conn.transaction():
                cur = conn.execute(sql)
                return {"rows": cur.rowcount}
        except psycopg.Error as e:
            mapped = fencing.translate(e)
            if mapped is e:
                raise
            raise mapped from e

    def release_all(self):
        for resource in list(self.leases):
            try:
                self.handle({"op": "release", "resource": resource})
            except Exception:
                pass


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


def main():
    worker = Worker()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        if request.get("op") == "quit":
            worker.release_all()
            sys.stdout.write(json.dumps({"ok": True}) + "\n")
            sys.stdout.flush()
            return
        try:
            answer = dict(ok=True, **worker.handle(request))
        except Exception as e:      # every failure is an answer
            answer = failure(e)
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()
    worker.release_all()


if __name__ == "__main__":
    main()
