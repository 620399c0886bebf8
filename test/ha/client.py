#!/usr/bin/python3
"""The HA test's client: a stream of lease grants and fenced writes against
whichever node is primary, one JSON line per event.

Run by test/ha/ha.py (Debian's /usr/bin/python3 and python3-psycopg2):

    client.py --dsn DSN --out FILE [--resources N] [--ttl '3 s']

Each round: fencing.acquire() a lease on one of N resources, a
fencing.fenced_update() of a row tied to that resource with the granted
token, fencing.release().  Every answer the server gave is written to FILE
before the next call, so what the file says is exactly what the client was
told:

    {"ev": "grant",  "res": ..., "tok": T, "port": P}    acquire() returned T
    {"ev": "busy",   "res": ...}                          acquire() returned NULL
    {"ev": "ack",    "key": K, "tok": T, "v": V, ...}     fenced write (v = V) committed
    {"ev": "stale",  "key": K, "tok": T, "code": ...}     fenced write refused as stale
    {"ev": "error",  "op": ..., "code": ..., "msg": ...}  anything else (outcome unknown)
    {"ev": "connect", "port": P}                          (re)connected to a primary

SIGTERM ends the stream after the current call.
"""
import argparse
import json
import signal
import sys
import time

import psycopg2

STALE_CODE = "23T01"

stopping = False


def on_term(_signo, _frame):
    global stopping
    stopping = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--resources", type=int, default=5)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--ttl", default="3 s")
    ap.add_argument("--prefix", default="ha:")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    out = open(args.out, "w", buffering=1)
    holder = "ha-client-%d" % int(time.time() * 1000)

    def emit(ev, **kw):
        kw["ev"] = ev
        kw["t"] = round(time.time(), 4)
        out.write(json.dumps(kw) + "\n")

    conn = None
    port = None
    last_connect_error = 0.0
    i = 0
    while not stopping:
        if conn is None:
            try:
                conn = psycopg2.connect(args.dsn)
                conn.autocommit = True
                port = conn.info.port
                emit("connect", port=port)
            except psycopg2.Error as e:
                conn = None
                now = time.time()
                if now - last_connect_error > 1.0:  # one line a second while nobody is primary
                    emit("error", op="connect", code=None, msg=str(e).strip().splitlines()[-1][:200])
                    last_connect_error = now
                time.sleep(0.2)
                continue

        r = i % args.resources
        res = "%s%d" % (args.prefix, r)
        # the rows tied to resource r: r, r + N, r + 2N ... below --keys, in turn
        per_res = max(1, (args.keys - r + args.resources - 1) // args.resources)
        key = r + args.resources * ((i // args.resources) % per_res)
        i += 1
        cur = conn.cursor()
        op = "acquire"
        try:
            cur.execute("SELECT fencing.acquire(%s, %s, %s::interval)", (res, holder, args.ttl))
            tok = cur.fetchone()[0]
            if tok is None:
                emit("busy", res=res)
                time.sleep(0.01)
                continue
            emit("grant", res=res, tok=tok, port=port)
            op = "write"
            try:
                cur.execute("SELECT fencing.fenced_update('items', %s::jsonb, %s, %s::jsonb)",
                            (json.dumps({"id": key}), tok, json.dumps({"v": i})))
                emit("ack", key=key, tok=tok, v=i, res=res, port=port)
            except psycopg2.Error as e:
                msg = (e.pgerror or str(e)).strip()
                if e.pgcode == STALE_CODE:
                    emit("stale", key=key, tok=tok, res=res, code=e.pgcode, msg=msg.splitlines()[0][:200])
                else:
                    raise
            op = "release"
            cur.execute("SELECT fencing.release(%s, %s, %s)", (res, holder, tok))
        except psycopg2.Error as e:
            msg = (e.pgerror or str(e) or "").strip()
            emit("error", op=op, code=e.pgcode, msg=(msg.splitlines() or [""])[0][:200], port=port)
            # whatever it was (server gone, demoted to read-only, canceled), start afresh
            try:
                conn.close()
            except psycopg2.Error:
                pass
            conn = None
            time.sleep(0.05)
        finally:
            try:
                cur.close()
            except psycopg2.Error:
                pass
    emit("stop")
    out.close()
    if conn is not None:
        conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
