#!/usr/bin/python3
"""Where a lease call's time goes, for the cases section 4 of test/bench/run
reports as missed: run by test/bench/profile_leases (which starts the
cluster, with pg_stat_statements and track_wal_io_timing, and Redis).

For each case, one load runs for --seconds (leasebench, or pgbench for
fenced_update()) while this script:
  - counts WAL writes and syncs (pg_stat_wal) and commits (pg_stat_database)
    per operation, and the time spent in WAL syncs;
  - samples pg_stat_activity every --interval seconds: what each client
    backend is doing (on the CPU or runnable: active without a wait event;
    waiting for the WAL flush, a lock, an LWLock; idle: the round trip and the
    client's own time);
  - sums the CPU time (utime + stime from /proc) of the client backends and of
    the server's other processes, per operation;
  - reads pg_stat_statements: execution time per call of each statement (the
    function's SQL and SPI, without the commit);
  - for Redis (same case, appendfsync always): fdatasync calls per operation,
    counted by perf stat on the syscall's tracepoint of redis-server.
Prints one block per case and writes a CSV.
"""
import argparse
import collections
import csv
import os
import re
import subprocess
import threading
import time

import psycopg

TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pids, seen):
    """utime + stime of the given processes, in seconds; seen keeps each
    process's last reading, for those that exit before the end."""
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            seen[pid] = (int(fields[11]) + int(fields[12])) / TICK
        except (FileNotFoundError, ProcessLookupError):
            pass
    return sum(seen.get(p, 0.0) for p in pids)


def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v), idle


def server_pids(conn):
    rows = conn.execute(
        "SELECT pid, backend_type FROM pg_stat_activity WHERE pid <> pg_backend_pid()").fetchall()
    return rows


def wal_counters(conn):
    return conn.execute(
        "SELECT w.wal_records, w.wal_write, w.wal_sync, w.wal_sync_time, w.wal_write_time, "
        "(SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) "
        "FROM pg_stat_wal w").fetchone()


def sampler(dsn, interval, stop, counts, query_counts, pids, seen):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SET application_name = 'profile_sampler'")
        while not stop.is_set():
            for group in pids:
                proc_cpu(group, seen)
            for state, wtype, wevent, query in c.execute(
                    "SELECT state, wait_event_type, wait_event, left(query, 60) FROM pg_stat_activity "
                    "WHERE backend_type = 'client backend' AND application_name <> 'profile_sampler' "
                    "AND pid <> pg_backend_pid() AND datname = current_database()"):
                if state == "active":
                    what = f"{wtype}:{wevent}" if wtype else "CPU (running or runnable)"
                elif state == "idle":
                    what = "idle: round trip and client"
                else:
                    what = f"{state}" + (f" {wtype}:{wevent}" if wtype else "")
                counts[what] += 1
                if state == "active":
                    query_counts[(query, what)] += 1
            time.sleep(interval)


def measure(name, dsn, cmd, seconds, interval, out):
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("SELECT pg_stat_statements_reset()")
        c.execute("SELECT pg_stat_reset_shared('wal')")
        time.sleep(0.6)  # the reset is applied by the next stats flush
        w0 = wal_counters(c)
        m0 = machine_busy()
        load = open("/proc/loadavg").read().split()[:3]
        stop = threading.Event()
        counts, qcounts = collections.Counter(), collections.Counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)  # the clients connect
        pids = [p for p, t in server_pids(c)]
        backends = [p for p, t in server_pids(c) if t == "client backend"]
        others = [p for p in pids if p not in backends]
        seen = {}
        b0, o0 = proc_cpu(backends, {}), proc_cpu(others, {})
        t0 = time.monotonic()
        th = threading.Thread(target=sampler, args=(dsn, interval, stop, counts, qcounts, (backends, others), seen))
        th.start()
        output, _ = proc.communicate()
        stop.set()
        th.join()
        elapsed = time.monotonic() - t0
        b1, o1 = proc_cpu(backends, seen), proc_cpu(others, seen)
        m1 = machine_busy()
        time.sleep(0.6)
        w1 = wal_counters(c)
        stmts = c.execute(
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 70), calls, total_exec_time / calls * 1000, "
            "total_plan_time, wal_records / calls::float8 FROM pg_stat_statements "
            "WHERE calls > 100 AND query !~* 'pg_stat|pg_backend_pid|application_name' "
            "ORDER BY total_exec_time DESC LIMIT 4").fetchall()
    ops = parse_ops(output)
    d = [b - a for a, b in zip(w0, w1)]
    records, writes, syncs, sync_ms, write_ms, commits = d
    total_samples = sum(counts.values()) or 1
    mtotal, midle = m1[0] - m0[0], m1[1] - m0[1]
    print(f"{name}: {ops['ops_per_s']:.0f} ops/s ({ops['ops']} in {elapsed:.1f} s), p99 {ops['p99']:.2f} ms;"
          f" load average at the start {' '.join(load)}; machine CPU busy {100 * (1 - midle / mtotal):.0f} %")
    print(f"   per operation: {commits / ops['ops']:.2f} commits, {writes / ops['ops']:.2f} WAL writes,"
          f" {syncs / ops['ops']:.2f} WAL flushes (fdatasync); {records / ops['ops']:.1f} WAL records;"
          f" one flush {sync_ms / max(syncs, 1) * 1000:.0f} µs on average, flushes {sync_ms / 10 / elapsed:.0f} %"
          f" of the wall clock")
    print(f"   CPU per operation: client backends {(b1 - b0) / ops['ops'] * 1e6:.0f} µs,"
          f" other server processes (WAL writer, ...) {(o1 - o0) / ops['ops'] * 1e6:.0f} µs")
    print("   client backends, sampled every %.0f ms (%d samples):" % (interval * 1000, total_samples))
    for what, n in counts.most_common(8):
        print(f"     {100 * n / total_samples:5.1f} %  {what}")
    lats = [float(x) for x in re.findall(r"latency average = ([\d.]+)", output)]
    if len(lats) == 3:  # pgbench with two scripts: the whole run's, then each script's
        print(f"   per script, latency average: (b) {lats[1]:.3f} ms, (e) {lats[2]:.3f} ms; (e)/(b) {lats[2] / lats[1]:.3f}")
        row_ratio = round(lats[2] / lats[1], 3)
    else:
        row_ratio = None
    for q, calls, exec_us, plan_ms, wal in stmts:
        print(f"   statement: {q}: {calls} calls, {exec_us:.0f} µs executing per call (no commit),"
              f" {wal:.1f} WAL records per call")
    row = dict(case=name, ops_per_s=round(ops["ops_per_s"]), p99_ms=ops["p99"], load1=load[0],
               commits_per_op=round(commits / ops["ops"], 3), wal_flushes_per_op=round(syncs / ops["ops"], 3),
               flush_us=round(sync_ms / max(syncs, 1) * 1000), backend_cpu_us_per_op=round((b1 - b0) / ops["ops"] * 1e6),
               cpu_pct=round(100 * counts["CPU (running or runnable)"] / total_samples, 1),
               walsync_pct=round(100 * sum(n for k, n in counts.items() if "WALSync" in k or "WALWrite" in k)
                                 / total_samples, 1),
               lock_pct=round(100 * sum(n for k, n in counts.items() if k.startswith(("Lock:", "LWLock:"))
                                        and "WAL" not in k) / total_samples, 1),
               idle_pct=round(100 * counts["idle: round trip and client"] / total_samples, 1))
    if row_ratio:
        row["ratio_e_b"] = row_ratio
    out.append(row)
    return row


def parse_ops(output):
    line = output.strip().splitlines()[-1]
    if "transactions" in output or "tps" in output:  # pgbench
        tx = int(re.search(r"number of transactions actually processed: (\d+)", output).group(1))
        tps = float(re.search(r"tps = ([\d.]+)", output).group(1))
        lat = float(re.search(r"latency average = ([\d.]+)", output).group(1))
        return dict(ops=tx, ops_per_s=tps, p99=lat)  # pgbench: the mean, not p99
    f = line.split()
    return dict(ops_per_s=float(f[0]), ops=int(f[1]), p99=float(f[3]))


def redis_fsyncs(leasebench, port, op, clients, seconds, out, name):
    """fdatasync calls of redis-server per operation, counted by perf on the
    syscall's tracepoint (no ptrace stop: Redis runs at its speed)."""
    info = subprocess.check_output(["redis-cli", "-p", str(port), "info", "server"], text=True)
    pid = re.search(r"process_id:(\d+)", info).group(1)
    st = subprocess.Popen(["perf", "stat", "-x,", "-e", "syscalls:sys_enter_fdatasync,syscalls:sys_enter_fsync",
                           "-p", pid], stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    cpu0 = proc_cpu([pid], {})
    res = subprocess.run([leasebench, "--redis", f"127.0.0.1:{port}", "--op", op, "--clients", str(clients),
                          "--seconds", str(seconds)], capture_output=True, text=True, check=True)
    cpu1 = proc_cpu([pid], {})
    time.sleep(0.2)
    st.send_signal(2)
    _, err = st.communicate()
    n = sum(int(f.split(",")[0]) for f in err.splitlines() if re.match(r"^\d+,", f))
    ops = parse_ops(res.stdout)
    print(f"{name}: {ops['ops_per_s']:.0f} ops/s, p99 {ops['p99']:.2f} ms; {n / ops['ops']:.3f} fdatasync per operation"
          f" ({ops['ops'] / max(n, 1):.1f} operations share one); redis-server's CPU per operation"
          f" {(cpu1 - cpu0) / ops['ops'] * 1e6:.0f} µs")
    out.append(dict(case=name, ops_per_s=round(ops["ops_per_s"]), wal_flushes_per_op=round(n / ops["ops"], 3),
                    server_cpu_us_per_op=round((cpu1 - cpu0) / ops["ops"] * 1e6)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsn", required=True)
    ap.add_argument("--leasebench", required=True)
    ap.add_argument("--pgbench", required=True)
    ap.add_argument("--bench-dir", required=True)
    ap.add_argument("--redis-port", type=int)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--interval", type=float, default=0.02)
    ap.add_argument("--cases", default="acquire-release:8,acquire-release:32,renew:32,fenced_update:8")
    ap.add_argument("--csv")
    a = ap.parse_args()
    out = []
    for case in a.cases.split(","):
        op, clients = case.split(":")
        if op == "fenced_update":
            # (b) and (e) of test/bench/run interleaved in one pgbench run, as
            # in its section 10: per statement, pg_stat_statements' execution
            # time; the flushes and waits are those of both.
            cmd = [a.pgbench, "-n", "-M", "prepared", "-c", clients, "-j", "2", "-T", str(int(a.seconds)),
                   "-D", "rows=100000", "-D", "token=5000000000", "-f", f"{a.bench_dir}/b_cond.sql@1",
                   "-f", f"{a.bench_dir}/e_fenced.sql@1", a.dsn]
            measure(f"conditional UPDATE + fenced_update() at {clients} clients", a.dsn, cmd, a.seconds,
                    a.interval, out)
            print()
            continue
        cmd = [a.leasebench, "--pg", a.dsn, "--op", op, "--clients", clients, "--seconds", str(a.seconds)]
        measure(f"PostgreSQL {op} at {clients} clients", a.dsn, cmd, a.seconds, a.interval, out)
        if a.redis_port:
            redis_fsyncs(a.leasebench, a.redis_port, op, clients, a.seconds, out,
                         f"Redis appendfsync always {op} at {clients} clients")
        print()
    print("Summary (per operation; an acquire-release operation is the pair; WAL wait: LWLock:WALWrite, IO:WALSync and"
          " IO:WALWrite in the samples of the client backends)")
    print(f"   {'case':<52} {'ops/s':>7} {'flushes':>8} {'ops/flush':>9} {'flush µs':>8} {'WAL wait':>8}"
          f" {'CPU':>6} {'idle':>6} {'CPU µs':>7}")
    print("   (CPU µs: PostgreSQL's client backends, or redis-server, per operation)")
    for r in out:
        f = r.get("wal_flushes_per_op", 0)
        print(f"   {r['case']:<52} {r['ops_per_s']:>7} {f:>8.3f} {(1 / f if f else float('inf')):>9.1f}"
              + (f" {r['flush_us']:>8} {r['walsync_pct']:>7.1f}% {r['cpu_pct']:>5.1f}% {r['idle_pct']:>5.1f}%"
                 f" {r['backend_cpu_us_per_op']:>7}" if "flush_us" in r
                 else f" {'':>8} {'':>8} {'':>6} {'':>6} {r['server_cpu_us_per_op']:>7}"))
    if a.csv:
        keys = sorted({k for r in out for k in r}, key=lambda k: (k != "case", k))
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(out)


if __name__ == "__main__":
    main()
