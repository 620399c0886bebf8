#!/usr/bin/python3
"""A lease holder for the partition test (test/ha/partition.py): acquires
leases from the Patroni cluster, writes to the fenced store while it believes
it holds one, renews, releases; one JSON line per answer it got.

    holder.py --name N --dsn DSN --store STORE_DSN --out FILE --resources a,b,c
              [--ttl 3] [--reconnect 1.0]

Timing rule: the holder believes it holds the lease from the START of its
last acknowledged acquire()/renew() until that start + ttl.  A renew that
fails or times out leaves it uncertain until that deadline: it keeps trying to
renew, and stops writing at the deadline.  An acquire or renew whose commit
was not confirmed (PostgreSQL's "canceled wait for synchronous replication"
warning: committed locally, not acknowledged) counts as an error.

Events ("t0" when the call started, "t1" when its answer came):

    {"ev": "acquire", "g": G, "res": R, "out": "ok"|"busy"|"error", "tok": T, "tli": L, "node": ADDR}
    {"ev": "renew",   "g": G, "out": "ok"|"lost"|"error", "tli": L, "node": ADDR}
    {"ev": "release", "g": G, "out": "ok"|"lost"|"error"}
    {"ev": "write",   "g": G, "res": R, "tok": T, "out": "ok"|"stale"|"error", "code": ...}
    {"ev": "end",     "g": G, "t": ..., "why": "released"|"lost"|"deadline"}

With --reconnect S the holder opens a new connection every S seconds, the
hosts of the multi-host DSN in a random order, so that with
target_session_attrs=read-write it lands on any node that accepts writes (the
old primary as well as the new one while both do).  SIGTERM stops it.
"""
import argparse
import json
import random
import signal
import sys
import time

import psycopg2

STALE_CODE = "23T01"
UNCONFIRMED = "canceled wait for synchronous replication"
TLI = "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int"

stopping = False


def on_term(_signo, _frame):
    global stopping
    stopping = True


def shuffled(dsn):
    """The same DSN with its host and port lists in a random (matching) order."""
    parts = dict(p.split("=", 1) for p in dsn.split() if "=" in p and "'" not in p)
    hosts, ports = parts["host"].split(","), parts["port"].split(",")
    if len(hosts) < 2:
        return dsn
    order = list(range(len(hosts)))
    random.shuffle(order)
    out = dsn.replace("host=" + parts["host"], "host=" + ",".join(hosts[i] for i in order))
    return out.replace("port=" + parts["port"], "port=" + ",".join(ports[i] for i in order))


class Holder:
    def __init__(self, args):
        self.a = args
        self.out = open(args.out, "w", buffering=1)
        self.conn = None
        self.conn_t = 0.0
        self.store = None
        self.n = 0

    def emit(self, ev, **kw):
        kw["ev"] = ev
        self.out.write(json.dumps(kw) + "\n")

    def close(self, which):
        c = getattr(self, which)
        if c is not None:
            try:
                c.close()
            except psycopg2.Error:
                pass
        setattr(self, which, None)

    def call(self, sql, args):
        """One autocommit statement on the cluster: (row, None) or (None, error text)."""
        if self.conn is not None and self.a.reconnect and time.time() - self.conn_t > self.a.reconnect:
            self.close("conn")
        try:
            if self.conn is None:
                self.conn = psycopg2.connect(shuffled(self.a.dsn))
                self.conn.autocommit = True
                self.conn_t = time.time()
            del self.conn.notices[:]
            cur = self.conn.cursor()
            cur.execute(sql, args)
            row = cur.fetchone()
            if any(UNCONFIRMED in n for n in self.conn.notices):
                self.close("conn")
                return None, "unconfirmed commit"
            return row, None
        except psycopg2.Error as e:
            msg = (getattr(e, "pgerror", None) or str(e) or "").strip()
            self.close("conn")
            return None, "%s %s" % (getattr(e, "pgcode", None) or "conn", (msg.splitlines() or [""])[0][:160])

    def write(self, g, res, tok, tli):
        t0 = time.time()
        try:
            if self.store is None:
                self.store = psycopg2.connect(self.a.store)
            cur = self.store.cursor()
            cur.execute("SET LOCAL fencing.token = %s" % int(tok))
            cur.execute("UPDATE ledger SET holder = %s, grant_id = %s, tli = %s, seq = seq + 1"
                        " WHERE res = %s", (self.a.name, g, tli, res))
            self.store.commit()
            self.emit("write", g=g, res=res, tok=tok, t0=t0, t1=time.time(), out="ok")
        except psycopg2.Error as e:
            code = getattr(e, "pgcode", None)
            self.emit("write", g=g, res=res, tok=tok, t0=t0, t1=time.time(),
                      out="stale" if code == STALE_CODE else "error", code=code)
            try:
                self.store.rollback()
            except (psycopg2.Error, AttributeError):
                self.close("store")

    def hold(self, g, res, tok, tli, until):
        """Writes and renews while the lease is believed held; returns why it ended."""
        a = self.a
        hold_end = time.time() + random.uniform(a.ttl, 3 * a.ttl)
        next_renew = time.time() + a.ttl / 3
        while True:
            now = time.time()
            if now >= until:
                return "deadline", until
            if stopping or now >= hold_end:
                t0 = time.time()
                row, err = self.call("SELECT fencing.release(%s, %s, %s)", (res, a.name, tok))
                self.emit("release", g=g, t0=t0, t1=time.time(),
                          out="error" if err else ("ok" if row[0] else "lost"), err=err)
                return "released", t0
            if now >= next_renew:
                t0 = time.time()
                row, err = self.call("SELECT fencing.renew(%s, %s, %s, make_interval(secs => %s)), %s,"
                                     " host(inet_server_addr())" % ("%s", "%s", "%s", "%s", TLI),
                                     (res, a.name, tok, a.ttl))
                t1 = time.time()
                if err:
                    self.emit("renew", g=g, t0=t0, t1=t1, out="error", err=err)
                    next_renew = t1 + 0.2
                elif not row[0]:
                    self.emit("renew", g=g, t0=t0, t1=t1, out="lost", tli=row[1], node=row[2])
                    return "lost", t1
                else:
                    self.emit("renew", g=g, t0=t0, t1=t1, out="ok", tli=row[1], node=row[2])
                    until = max(until, t0 + a.ttl)
                    next_renew = t1 + a.ttl / 3
                continue
            if time.time() < until:
                self.write(g, res, tok, tli)
            time.sleep(0.05)

    def run(self):
        a = self.a
        resources = a.resources.split(",")
        while not stopping:
            res = random.choice(resources)
            self.n += 1
            g = "%s/%d" % (a.name, self.n)
            t0 = time.time()
            row, err = self.call("SELECT fencing.acquire(%s, %s, make_interval(secs => %s)), %s,"
                                 " host(inet_server_addr())" % ("%s", "%s", "%s", TLI),
                                 (res, a.name, a.ttl))
            t1 = time.time()
            if err:
                self.emit("acquire", g=g, res=res, t0=t0, t1=t1, out="error", err=err)
                time.sleep(0.1)
                continue
            if row[0] is None:
                self.emit("acquire", g=g, res=res, t0=t0, t1=t1, out="busy", tli=row[1], node=row[2])
                time.sleep(0.05)
                continue
            tok, tli = row[0], row[1]
            self.emit("acquire", g=g, res=res, t0=t0, t1=t1, out="ok", tok=tok, tli=tli, node=row[2])
            why, t = self.hold(g, res, tok, tli, t0 + a.ttl)
            self.emit("end", g=g, t=t, why=why)
        self.out.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--resources", required=True)
    ap.add_argument("--ttl", type=float, default=3.0)
    ap.add_argument("--reconnect", type=float, default=0.0)
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    random.seed()
    Holder(args).run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
