#!/usr/bin/python3
"""The HA test: one etcd and a three-node Patroni cluster of PostgreSQL 15 with
the fencing extension preloaded, a client streaming lease grants and fenced
writes to whichever node is primary, and failovers: the primary's postmaster
killed, a switchover, a host crash while the walsenders are frozen.  Each
scenario runs in synchronous and in asynchronous mode, and after each one the
client's record and the new primary are checked.

Started by test/ha/run (which installs the Debian packages, makes the
temporary directory and sweeps up after us); all state lives under --tmp.
Runs as root; Patroni and PostgreSQL run as the postgres user.
"""
import argparse
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psycopg2

PGBIN = "/usr/lib/postgresql/15/bin"
HERE = os.path.dirname(os.path.realpath(__file__))
STALE_CODE = "23T01"
SCENARIOS = ("kill9", "switchover", "hostcrash")
MODES = ("sync", "async")
START = time.time()

# Seconds per phase: client before the fault, client on the new primary after
# it, walsenders frozen before the host crash; grants wanted in each phase.
PROFILES = {
    "quick": dict(warm=2, post=2, freeze=2, grants=5),
    "default": dict(warm=4, post=4, freeze=2, grants=10),
    "long": dict(warm=20, post=15, freeze=5, grants=50),
}


class HarnessError(Exception):
    """The test could not do what it meant to (not a failed check)."""


class Interrupted(BaseException):
    pass


def say(msg):
    print("== [%5.1fs] %s" % (time.time() - START, msg), file=sys.stderr, flush=True)


def wait_until(what, timeout, pred, interval=0.25):
    """Calls pred() until it returns something true, for at most timeout seconds."""
    deadline = time.time() + timeout
    last_exc = None
    while True:
        try:
            v = pred()
            if v:
                return v
        except (OSError, psycopg2.Error) as e:  # not there yet; a HarnessError is final
            last_exc = e
        if time.time() >= deadline:
            extra = " (last error: %s)" % str(last_exc).strip().splitlines()[0] if last_exc else ""
            raise HarnessError("timed out after %ds waiting for %s%s" % (timeout, what, extra))
        time.sleep(interval)


# ---------------------------------------------------------------- processes
#
# Every process we start runs with its working directory under the temporary
# directory (PostgreSQL's processes all run in their data directory), so "the
# processes of node N" are exactly those whose cwd is under N's directory.

def proc_cwd(pid):
    try:
        return os.readlink("/proc/%d/cwd" % pid)
    except OSError:
        return None


def proc_alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def proc_cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def pids_in(path, exact=False):
    me = os.getpid()
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        pid = int(d)
        cwd = proc_cwd(pid)
        if cwd is None:
            continue
        if (cwd == path or (not exact and cwd.startswith(path + "/"))) and proc_alive(pid):
            out.append(pid)
    return out


def signal_pids(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def wait_gone(pids, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not any(proc_alive(p) for p in pids):
            return True
        time.sleep(0.05)
    return not any(proc_alive(p) for p in pids)


def clean_env(extra=None):
    """No PG*, PATRONI_*, ETCD_*, PYTHON* settings leak into what we start."""
    env = {
        "PATH": "/usr/sbin:/usr/bin:/sbin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": "/var/lib/postgresql",
        "TZ": "UTC",
    }
    env.update(extra or {})
    return env


def free_port_block(n, tries=200):
    """n consecutive loopback ports nobody listens on (below the ephemeral range)."""
    for _ in range(tries):
        base = random.randrange(12000, 19000)
        ok = True
        for p in range(base, base + n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                ok = False
            finally:
                s.close()
            if not ok:
                break
        if ok:
            return list(range(base, base + n))
    raise HarnessError("no block of %d free loopback ports found" % n)


def http(method, url, body=None, timeout=5.0):
    """(status, parsed JSON or text); (None, error) when nothing answered."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        return None, str(e)
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw.decode(errors="replace").strip()


def tail(path, n):
    try:
        with open(path, errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return "(no %s)\n" % path
    return "".join(lines[-n:])


# ---------------------------------------------------------------- cluster

class Node:
    # where the node listens and whom it trusts; test/ha/partition.py puts each
    # node in a network namespace of its own (prefix: the command that enters it)
    host = "127.0.0.1"
    trusted = "127.0.0.1/32"
    prefix = ()
    python_path = None  # a patched copy of the patroni package, if any

    def __init__(self, tmp, idx, pg_port, api_port, host=None):
        self.name = "node%d" % idx
        self.host = host or self.host
        self.dir = os.path.join(tmp, self.name)
        self.data = os.path.join(self.dir, "data")
        self.pg_port = pg_port
        self.api_port = api_port
        self.api = "http://%s:%d" % (self.host, api_port)
        self.config = os.path.join(self.dir, "patroni.yml")
        self.log = os.path.join(self.dir, "patroni.log")
        self.proc = None

    def write_config(self, scope, etcd_port, sync, etcd_host="127.0.0.1", parameters=None):
        cfg = {
            "scope": scope,
            "namespace": "/fencing-ha/",
            "name": self.name,
            "log": {"level": "INFO", "format": "%(asctime)s %(levelname)s: %(message)s"},
            "restapi": {"listen": "%s:%d" % (self.host, self.api_port),
                        "connect_address": "%s:%d" % (self.host, self.api_port)},
            "etcd3": {"hosts": ["%s:%d" % (etcd_host, etcd_port)], "protocol": "http"},
            "bootstrap": {
                "dcs": {
                    # failovers in seconds: a dead leader's key expires after ttl
                    "ttl": 10, "loop_wait": 1, "retry_timeout": 3,
                    # a crashed primary fails over at once instead of being restarted in place
                    "primary_start_timeout": 0,
                    # let an asynchronous standby that lags take over (that is what we test)
                    "maximum_lag_on_failover": 64 * 1024 * 1024,
                    "synchronous_mode": sync,
                    "synchronous_mode_strict": False,
                    "postgresql": {
                        "use_pg_rewind": True,
                        "use_slots": True,
                        "parameters": {
                            "shared_preload_libraries": "fencing",
                            "wal_log_hints": "on",
                            "max_connections": 50,
                            "max_wal_senders": 10,
                            "max_replication_slots": 10,
                            "wal_keep_size": "256MB",
                            "hot_standby": "on",
                            "log_line_prefix": "%m [%p] %q%a ",
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}, "data-checksums"],
            },
            "postgresql": {
                "listen": "%s:%d" % (self.host, self.pg_port),
                "connect_address": "%s:%d" % (self.host, self.pg_port),
                "data_dir": self.data,
                "bin_dir": PGBIN,
                "pgpass": os.path.join(self.dir, "pgpass"),
                "authentication": {
                    "superuser": {"username": "postgres", "password": "fencing-ha"},
                    "replication": {"username": "replicator", "password": "fencing-ha"},
                },
                "parameters": {"unix_socket_directories": self.dir},
                "pg_hba": [
                    "local all all trust",
                    "host all all %s trust" % self.trusted,
                    "host replication all %s trust" % self.trusted,
                ],
                "basebackup": [{"checkpoint": "fast"}],
                "remove_data_directory_on_rewind_failure": True,
                "remove_data_directory_on_diverged_timelines": True,
            },
            "watchdog": {"mode": "off"},
        }
        cfg["bootstrap"]["dcs"]["postgresql"]["parameters"].update(parameters or {})
        with open(self.config, "w") as f:
            json.dump(cfg, f, indent=1)  # JSON is YAML
        os.chown(self.config, *pg_ids())

    def start(self):
        logf = open(self.log, "a")
        if self.python_path:
            argv = ["/usr/bin/python3", "-m", "patroni", self.config]
            env = clean_env({"PYTHONPATH": self.python_path})
        else:
            argv, env = ["/usr/bin/patroni", self.config], clean_env()
        if self.prefix:  # the prefix enters the namespace as root, then becomes postgres
            argv = list(self.prefix) + ["setpriv", "--reuid=postgres", "--regid=postgres",
                                        "--clear-groups", "--"] + argv
            ids = {}
        else:
            ids = dict(user="postgres", group="postgres", extra_groups=[])
        self.proc = subprocess.Popen(
            argv, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=env, start_new_session=True, **ids)
        logf.close()

    def postmaster_pid(self):
        try:
            with open(os.path.join(self.data, "postmaster.pid")) as f:
                pid = int(f.readline())
        except (OSError, ValueError):
            return None
        return pid if proc_alive(pid) and proc_cwd(pid) == self.data else None

    def dsn(self, app="fencing-ha-check"):
        return ("host=%s port=%d dbname=postgres user=postgres connect_timeout=3 "
                "application_name=%s options='-c statement_timeout=15s'" % (self.host, self.pg_port, app))

    def connect(self):
        c = psycopg2.connect(self.dsn())
        c.autocommit = True
        return c

    def query(self, sql, args=None):
        c = self.connect()
        try:
            cur = c.cursor()
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def kill_postgres(self):
        """kill -9 of the postmaster and its children (Patroni stays up)."""
        pm = self.postmaster_pid()
        if pm is None:
            raise HarnessError("%s has no running postmaster to kill" % self.name)
        pids = pids_in(self.data, exact=True)
        signal_pids([pm], signal.SIGKILL)
        signal_pids([p for p in pids if p != pm], signal.SIGKILL)
        if not wait_gone(pids, 10):
            raise HarnessError("processes of %s survived kill -9" % self.name)
        return pm, len(pids) - 1

    def crash_host(self):
        """kill -9 of Patroni and of every PostgreSQL process of the node at once."""
        patroni = pids_in(self.dir, exact=True)
        everything = pids_in(self.dir)
        signal_pids(patroni, signal.SIGKILL)
        signal_pids([p for p in everything if p not in patroni], signal.SIGKILL)
        deadline = time.time() + 10
        while True:
            left = pids_in(self.dir)
            if not left:
                break
            if time.time() > deadline:
                raise HarnessError("processes of %s survived the host crash: %s" % (self.name, left))
            signal_pids(left, signal.SIGKILL)
            time.sleep(0.05)
        if self.proc is not None:
            self.proc.wait(timeout=10)
            self.proc = None
        return len(everything)

    def walsenders(self):
        return [p for p in pids_in(self.data, exact=True) if "walsender" in proc_cmdline(p)]


def pg_ids():
    import pwd
    pw = pwd.getpwnam("postgres")
    return pw.pw_uid, pw.pw_gid


class Cluster:
    etcd_host = "127.0.0.1"
    etcd_prefix = ()  # the command that enters etcd's network namespace, if any
    parameters = None  # extra PostgreSQL parameters for Patroni's bootstrap

    def __init__(self, tmp):
        self.tmp = tmp
        ports = free_port_block(8)
        self.etcd_port, self.etcd_peer = ports[0], ports[1]
        self.nodes = [Node(tmp, i + 1, ports[2 + i], ports[5 + i]) for i in range(3)]
        self.scope = "fencing-ha-%d" % os.getpid()
        self.etcd_dir = os.path.join(tmp, "etcd")
        self.etcd_log = os.path.join(self.etcd_dir, "etcd.log")
        self.etcd = None

    def by_name(self, name):
        return next(n for n in self.nodes if n.name == name)

    def start(self, sync):
        os.makedirs(self.etcd_dir)
        logf = open(self.etcd_log, "a")
        peer = "http://%s:%d" % (self.etcd_host, self.etcd_peer)
        client = "http://%s:%d" % (self.etcd_host, self.etcd_port)
        self.etcd = subprocess.Popen(
            list(self.etcd_prefix) + ["/usr/bin/etcd", "--name", "ha", "--data-dir", os.path.join(self.etcd_dir, "data"),
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", "ha=" + peer, "--initial-cluster-state", "new",
             "--initial-cluster-token", self.scope, "--logger", "zap", "--log-outputs", "stderr"],
            cwd=self.etcd_dir, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=clean_env(), start_new_session=True)
        logf.close()
        say("etcd on %s:%d (peer %d); Patroni nodes: %s" % (
            self.etcd_host, self.etcd_port, self.etcd_peer,
            ", ".join("%s %s pg %d api %d" % (n.name, n.host, n.pg_port, n.api_port)
                      for n in self.nodes)))

        def etcd_healthy():
            if self.etcd.poll() is not None:
                raise HarnessError("etcd exited with status %s" % self.etcd.returncode)
            st, body = http("GET", client + "/health", timeout=2)
            return st == 200 and isinstance(body, dict) and body.get("health") in ("true", True)
        wait_until("etcd to answer /health", 30, etcd_healthy)

        uid, gid = pg_ids()
        for n in self.nodes:
            os.makedirs(n.dir)
            os.chown(n.dir, uid, gid)
            os.chmod(n.dir, 0o700)
            n.write_config(self.scope, self.etcd_port, sync, self.etcd_host, self.parameters)
        # node1 bootstraps (initdb) alone, so the others cannot race it; then they clone it
        self.nodes[0].start()
        wait_until("node1 to bootstrap the cluster (Patroni /primary)", 120,
                   lambda: self._alive_or_die(self.nodes[0]) and
                   http("GET", self.nodes[0].api + "/primary", timeout=2)[0] == 200, interval=0.5)
        for n in self.nodes[1:]:
            n.start()

    def _alive_or_die(self, node):
        if node.proc is not None and node.proc.poll() is not None:
            raise HarnessError("Patroni of %s exited with status %s" % (node.name, node.proc.returncode))
        return True

    def cluster_view(self):
        """Patroni's /cluster from the first node whose REST API answers."""
        for n in self.nodes:
            st, body = http("GET", n.api + "/cluster", timeout=2)
            if st == 200 and isinstance(body, dict):
                return body
        return None

    def leader(self):
        """(node, view) of the running leader that really is a read-write PostgreSQL."""
        view = self.cluster_view()
        if not view:
            return None
        for m in view.get("members", []):
            if m.get("role") == "leader" and m.get("state") == "running":
                node = self.by_name(m["name"])
                if http("GET", node.api + "/primary", timeout=2)[0] != 200:
                    return None
                if node.query("SELECT pg_is_in_recovery()")[0][0]:
                    return None
                return node, view
        return None

    def ready(self, sync):
        """The leader's node if all three nodes run and both replicas stream to it
        (and, in synchronous mode, one of them is the synchronous standby)."""
        got = self.leader()
        if not got:
            return None
        node, view = got
        members = view.get("members", [])
        if len(members) != 3 or any(m.get("state") not in ("running", "streaming") for m in members):
            return None
        ssn, streaming, sync_rows = node.query(
            "SELECT current_setting('synchronous_standby_names'),"
            " (SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'),"
            " (SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync')")[0]
        if streaming != 2:
            return None
        if sync:
            if not ssn or sync_rows < 1 or not any(m.get("role") == "sync_standby" for m in members):
                return None
        elif ssn or sync_rows:
            return None
        return node

    def wait_ready(self, sync, timeout, what="the cluster to be ready"):
        for n in self.nodes:
            self._alive_or_die(n)
        return wait_until(what + (" (synchronous)" if sync else " (asynchronous)"), timeout,
                          lambda: self.ready(sync), interval=0.5)

    def set_sync_mode(self, sync):
        st, body = http("PATCH", self.nodes_alive()[0].api + "/config",
                        {"synchronous_mode": sync}, timeout=10)
        if st != 200:
            raise HarnessError("PATCH /config synchronous_mode=%s: %s %s" % (sync, st, body))

    def revive(self):
        """After a failed scenario: thaw what may be frozen, start Patroni where it is not running."""
        signal_pids(pids_in(self.tmp), signal.SIGCONT)
        for n in self.nodes:
            if n.proc is None or n.proc.poll() is not None:
                say("starting Patroni of %s again" % n.name)
                n.start()

    def nodes_alive(self):
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def stop(self):
        """Stops everything we started: Patroni, PostgreSQL (immediate), etcd."""
        patronis = []
        for n in self.nodes:
            patronis += pids_in(n.dir, exact=True)
        signal_pids(patronis, signal.SIGKILL)
        wait_gone(patronis, 5)
        postmasters = [p for p in (n.postmaster_pid() for n in self.nodes) if p]
        signal_pids(postmasters, signal.SIGQUIT)  # immediate shutdown; frees shared memory
        if not wait_gone(postmasters, 8):
            signal_pids(postmasters, signal.SIGKILL)
        for n in self.nodes:
            if n.proc is not None:
                try:
                    n.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        if self.etcd is not None and self.etcd.poll() is None:
            self.etcd.terminate()
            try:
                self.etcd.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.etcd.kill()


def sweep(tmp, timeout=15):
    """SIGKILL whatever still runs with its cwd under tmp, until nothing does."""
    deadline = time.time() + timeout
    while True:
        left = pids_in(tmp)
        if not left:
            return True
        if time.time() > deadline:
            say("still running under %s: %s" % (tmp, left))
            return False
        signal_pids(left, signal.SIGKILL)
        time.sleep(0.1)


# ---------------------------------------------------------------- client

class Client:
    def __init__(self, tmp, cluster, label, ttl="3 s"):
        self.dir = os.path.join(tmp, "client")
        os.makedirs(self.dir, exist_ok=True)
        self.out = os.path.join(self.dir, label + ".jsonl")
        self.err = os.path.join(self.dir, label + ".stderr")
        hosts = ",".join("127.0.0.1" for _ in cluster.nodes)
        ports = ",".join(str(n.pg_port) for n in cluster.nodes)
        dsn = ("host=%s port=%s dbname=postgres user=postgres target_session_attrs=read-write "
               "connect_timeout=2 application_name=fencing-ha-client keepalives=1 "
               "keepalives_idle=2 keepalives_interval=1 keepalives_count=2 tcp_user_timeout=5000 "
               "options='-c statement_timeout=20s'" % (hosts, ports))
        errf = open(self.err, "w")
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", "-I", os.path.join(HERE, "client.py"), "--dsn", dsn,
             "--out", self.out, "--ttl", ttl],
            cwd=self.dir, stdin=subprocess.DEVNULL, stdout=errf, stderr=subprocess.STDOUT,
            env=clean_env(), start_new_session=True)
        errf.close()

    def events(self):
        out = []
        try:
            with open(self.out) as f:
                for line in f:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass  # a line being written
        except FileNotFoundError:
            pass
        return out

    def check_running(self):
        if self.proc.poll() is not None:
            raise HarnessError("the client exited with status %s:\n%s" % (
                self.proc.returncode, tail(self.err, 20)))
        return True

    def grants_since(self, t, port=None):
        return sum(1 for e in self.events()
                   if e["ev"] == "grant" and e["t"] >= t and (port is None or e["port"] == port))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()  # stuck in a call: every answer is already on disk
                self.proc.wait(timeout=5)


# ---------------------------------------------------------------- checks

class Ledger:
    """What the client was told, over the whole run (one cluster, one token sequence)."""

    def __init__(self):
        self.issued = {}      # token -> (mode, scenario, resource, port)
        self.highest = {}     # resource -> highest token granted so far

    def account(self, mode, scen, events):
        grants = [e for e in events if e["ev"] == "grant"]
        twice, below, examples = 0, 0, []
        for g in grants:
            tok, res = g["tok"], g["res"]
            if tok in self.issued:
                twice += 1
                if len(examples) < 3:
                    first = self.issued[tok]
                    examples.append("token %d: granted on %s (port %d, %s/%s), again on %s (port %d)"
                                    % (tok, first[2], first[3], first[0], first[1], res, g["port"]))
            else:
                self.issued[tok] = (mode, scen, res, g["port"])
            prev = self.highest.get(res)
            if prev is not None and tok <= prev:
                below += 1
            self.highest[res] = tok if prev is None else max(prev, tok)
        return len(grants), twice, below, examples


def check_new_primary(node, events):
    """(acked writes lost, stale refused?, how the stale write was refused)."""
    conn = node.connect()
    try:
        cur = conn.cursor()
        cur.execute("SELECT id, last_fencing_token FROM items")
        stored = dict(cur.fetchall())
        acks = [e for e in events if e["ev"] == "ack"]
        audit = set()
        if acks:
            cur.execute("SELECT id, token, v FROM items_audit WHERE token >= %s",
                        (min(a["tok"] for a in acks),))
            audit = set(cur.fetchall())
        # lost: the row's token is below it, or no record that the write ever happened here
        lost = [a for a in acks if stored.get(a["key"], 0) < a["tok"]
                or (a["key"], a["tok"], a["v"]) not in audit]
        # the row written last; present the newest token acknowledged for it that is below its mark
        key = max(stored, key=lambda k: stored[k])
        mark = stored[key]
        older = [a["tok"] for a in acks if a["key"] == key and a["tok"] < mark]
        stale = max(older) if older else mark - 1
        if stale < 1:
            return lost, False, "no row has been written: nothing to be stale against"
        conn.autocommit = False
        try:
            cur.execute("SELECT fencing.fenced_update('items', %s::jsonb, %s, '{\"v\": -1}'::jsonb)",
                        (json.dumps({"id": key}), stale))
            how = "ACCEPTED token %d on key %d (stored %d): returned %s" % (
                stale, key, mark, cur.fetchone()[0])
            refused = False
        except psycopg2.Error as e:
            msg = (e.pgerror or str(e)).strip()
            refused = e.pgcode == STALE_CODE
            how = "token %d on key %d (stored %d): %s %s" % (stale, key, mark, e.pgcode,
                                                          msg.splitlines()[0] if msg else "")
        conn.rollback()
        return lost, refused, how
    finally:
        conn.close()


# ---------------------------------------------------------------- scenarios

class Run:
    def __init__(self, args):
        self.args = args
        self.tmp = os.path.realpath(args.tmp)
        self.p = PROFILES[args.profile]
        self.cluster = None
        self.ledger = Ledger()
        self.results = []
        self.client = None

    def setup_schema(self, node):
        def attempt():
            c = node.connect()
            try:
                cur = c.cursor()
                cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
                cur.execute("CREATE TABLE IF NOT EXISTS items (id int PRIMARY KEY, v int)")
                cur.execute("SELECT fencing.protect('items')")
                cur.execute("INSERT INTO items SELECT g, 0, 1 FROM generate_series(0, 9) g"
                            " ON CONFLICT (id) DO NOTHING")
                # every accepted write, so that a lost acknowledged write is seen even
                # when a later write to the same row has moved its token past it
                cur.execute("CREATE TABLE IF NOT EXISTS items_audit (id int NOT NULL,"
                            " token bigint NOT NULL, v int)")
                cur.execute("CREATE OR REPLACE FUNCTION items_audit() RETURNS trigger"
                            " LANGUAGE plpgsql AS $$BEGIN INSERT INTO items_audit"
                            " VALUES (NEW.id, NEW.last_fencing_token, NEW.v); RETURN NULL; END$$")
                cur.execute("CREATE OR REPLACE TRIGGER items_audit AFTER UPDATE ON items"
                            " FOR EACH ROW EXECUTE FUNCTION items_audit()")
                cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'fencing'")
                return cur.fetchone()[0]
            finally:
                c.close()
        # another engineer may be reinstalling the extension just now: retry
        version = wait_until("CREATE EXTENSION fencing and the items table", 90, attempt, interval=2)
        say("fencing %s created on %s; items protected, 10 rows with token 1" % (version, node.name))

    def scenario(self, mode, scen):
        p, cl = self.p, self.cluster
        sync = mode == "sync"
        res = dict(mode=mode, scenario=scen, grants=0, twice=None, below=None, stale=None,
                   lost=None, notes=[], ok=False, error=None)
        self.results.append(res)
        old = cl.wait_ready(sync, 150)
        say("%s/%s: primary %s (port %d); client streaming" % (mode, scen, old.name, old.pg_port))
        self.client = client = Client(self.tmp, cl, "%d-%s-%s" % (len(self.results), mode, scen))
        t0 = time.time()
        wait_until("the client's first %d grants" % p["grants"], 60,
                   lambda: client.check_running() and time.time() - t0 >= p["warm"]
                   and client.grants_since(t0) >= p["grants"])

        t_fault = time.time()
        if scen == "kill9":
            pm, nchildren = old.kill_postgres()
            say("kill -9 of %s's postmaster (pid %d) and its %d children" % (old.name, pm, nchildren))
        elif scen == "switchover":
            st, body = http("POST", old.api + "/switchover", {"leader": old.name}, timeout=90)
            say("switchover away from %s: %s %s" % (old.name, st, str(body)[:120]))
            if st != 200:
                raise HarnessError("switchover refused: %s %s" % (st, body))
        elif scen == "hostcrash":
            ws = old.walsenders()
            if not ws:
                raise HarnessError("no walsender found on %s" % old.name)
            signal_pids(ws, signal.SIGSTOP)
            t_freeze = time.time()
            say("SIGSTOP %d walsenders of %s for %ss, client still acquiring"
                % (len(ws), old.name, p["freeze"]))
            time.sleep(p["freeze"])
            t_crash = time.time()
            n = old.crash_host()
            t_fault = time.time()
            # grants answered while no standby could confirm anything (an answer
            # already on its way when the walsenders stopped may land in the first 0.2 s)
            during = sum(1 for e in client.events() if e["ev"] == "grant"
                         and t_freeze + 0.2 < e["t"] <= t_crash)
            say("host crash of %s: kill -9 of Patroni and PostgreSQL (%d processes); "
                "%d grants while the walsenders were frozen" % (old.name, n, during))
            res["notes"].append("%d grants in the %.1fs the walsenders were frozen"
                                % (during, t_crash - t_freeze))

        def new_leader():
            got = cl.leader()
            if not got:
                return None
            node = got[0]
            if node is old and time.time() - t_fault < 60:
                return None  # give Patroni time to fail over rather than restart in place
            return node
        new = wait_until("a new primary", 120, new_leader, interval=0.25)
        t_new = time.time()
        failover = "%s -> %s in %.1fs" % (old.name, new.name, t_new - t_fault)
        if new is old:
            failover = "%s restarted in place after %.1fs (no failover)" % (old.name, t_new - t_fault)
        res["notes"].append("primary " + failover)
        say("%s/%s: primary %s" % (mode, scen, failover))

        wait_until("%d grants from the new primary %s" % (p["grants"], new.name), 90,
                   lambda: client.check_running() and time.time() - t_new >= p["post"]
                   and client.grants_since(t_new, new.pg_port) >= p["grants"])
        client.stop()
        events = client.events()
        n, twice, below, examples = self.ledger.account(mode, scen, events)
        self.client = None
        # how the new primary's first token compares with the old primary's last one
        last_old = [e["tok"] for e in events if e["ev"] == "grant" and e["port"] == old.pg_port
                    and e["t"] <= (t_fault if new is old else t_new)]
        first_new = [e["tok"] for e in events if e["ev"] == "grant" and e["port"] == new.pg_port
                     and e["t"] >= t_fault]
        if last_old and first_new:
            gap = first_new[0] - max(last_old)
            res["notes"].append("first token from %s is %d %s the last one from %s" % (
                new.name, abs(gap), "above" if gap > 0 else "BELOW (or equal to)", old.name))
        try:
            lost, refused, how = check_new_primary(new, events)
        except psycopg2.Error as e:
            raise HarnessError("checking the new primary %s: %s" % (new.name, str(e).strip()))
        res.update(grants=n, twice=twice, below=below, stale=refused, lost=len(lost))
        errors = [e for e in events if e["ev"] == "error"]
        stale_own = sum(1 for e in events if e["ev"] == "stale")
        acks = sum(1 for e in events if e["ev"] == "ack")
        res["notes"].append("%d acked writes, %d client errors (%s), %d of its own writes refused as stale"
                            % (acks, len(errors), ", ".join(sorted({"%s %s" % (e["op"], e["code"] or "conn")
                                                                   for e in errors})) or "none", stale_own))
        res["notes"].append("stale write on %s: %s" % (new.name, how))
        res["notes"] += examples
        if lost:
            res["notes"].append("acked writes missing on %s: %s" % (new.name, ", ".join(
                "key %d token %d" % (a["key"], a["tok"]) for a in lost[:5])))
        res["ok"] = twice == 0 and below == 0 and refused and (not sync or not lost) and n > 0

        # the failed node rejoins before the next scenario
        t_rejoin = time.time()
        if scen == "hostcrash":
            old.start()
        try:
            cl.wait_ready(sync, 120, "%s to rejoin" % old.name)
        except HarnessError as e:
            say("%s; asking Patroni to reinitialize it" % e)
            http("POST", old.api + "/reinitialize", {"force": True}, timeout=10)
            cl.wait_ready(sync, 150, "%s to rejoin after reinitialize" % old.name)
            res["notes"].append("%s had to be reinitialized" % old.name)
        say("%s rejoined in %.1fs" % (old.name, time.time() - t_rejoin))

    def main(self):
        modes = self.args.modes
        scens = self.args.scenarios
        broken = None
        try:
            self.cluster = Cluster(self.tmp)
            self.cluster.start(sync=(modes[0] == "sync"))
            leader = self.cluster.wait_ready(modes[0] == "sync", 180, "three nodes to come up")
            say("three nodes up, %s is primary" % leader.name)
            self.setup_schema(leader)
        except HarnessError as e:
            broken = "setting up the cluster failed: %s" % e
            say("ERROR: " + broken)
            if self.cluster is not None:
                self.print_tails()
        for mode in modes:
            if broken is None:
                try:
                    if self.results:  # the cluster already runs; switch the mode
                        self.cluster.set_sync_mode(mode == "sync")
                        say("synchronous_mode set to %s" % (mode == "sync"))
                    self.cluster.wait_ready(mode == "sync", 120)
                except HarnessError as e:
                    broken = str(e)
            for scen in scens:
                if broken is not None:
                    self.results.append(dict(mode=mode, scenario=scen, grants=0, twice=None,
                                             below=None, stale=None, lost=None, ok=False,
                                             notes=[], error="not run: " + broken))
                else:
                    try:
                        self.scenario(mode, scen)
                    except HarnessError as e:
                        self.results[-1].update(error=str(e), ok=False)
                        say("ERROR in %s/%s: %s" % (mode, scen, e))
                        self.print_tails()
                        if self.client is not None:  # its grants still count for the whole run
                            self.client.stop()
                            n, twice, below, examples = self.ledger.account(
                                mode, scen, self.client.events())
                            self.results[-1].update(grants=n, twice=twice, below=below)
                            self.results[-1]["notes"] += examples
                            self.client = None
                        try:
                            self.cluster.revive()
                            self.cluster.wait_ready(mode == "sync", 150, "the cluster to recover")
                            say("the cluster recovered; going on")
                        except HarnessError as e2:
                            broken = "%s/%s failed (%s) and the cluster did not recover: %s" % (
                                mode, scen, e, e2)
                            say("ERROR: " + broken)
                r = self.results[-1]
                print("test ha_%s_%s ... %s" % (mode, scen, "ok" if r["ok"] else "FAILED"), flush=True)

    def print_tails(self):
        print("----- etcd log (tail)\n" + tail(self.cluster.etcd_log, 10), file=sys.stderr)
        for n in self.cluster.nodes:
            print("----- %s patroni/postgres log (tail)\n%s" % (n.name, tail(n.log, 40)), file=sys.stderr)
        for f in sorted(os.listdir(os.path.join(self.tmp, "client"))) if os.path.isdir(
                os.path.join(self.tmp, "client")) else []:
            if f.endswith(".stderr") and os.path.getsize(os.path.join(self.tmp, "client", f)):
                print("----- client %s\n%s" % (f, tail(os.path.join(self.tmp, "client", f), 20)),
                      file=sys.stderr)
        sys.stderr.flush()

    def report(self):
        def cell(v):
            if v is None:
                return "-"
            if v is True:
                return "yes"
            if v is False:
                return "NO"
            return str(v)
        head = ["mode", "scenario", "grants", "tokens issued twice", "tokens below an earlier one",
                "stale refused", "acked writes lost"]
        rows = [[r["mode"], r["scenario"], cell(r["grants"]), cell(r["twice"]), cell(r["below"]),
                 cell(r["stale"]), cell(r["lost"]) + (" (async: not checked)"
                                                       if r["mode"] == "async" and r["lost"] else "")]
                for r in self.results]
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]
        line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"
        print()
        print(line(head))
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in rows:
            print(line(row))
        print()
        for r in self.results:
            print("%s/%s: %s" % (r["mode"], r["scenario"], "ok" if r["ok"] else "FAILED"))
            if r.get("error"):
                print("    error: " + r["error"])
            for note in r["notes"]:
                print("    " + note)
        sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    args = ap.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    if not set(args.modes) <= set(MODES) or not set(args.scenarios) <= set(SCENARIOS) \
            or not args.modes or not args.scenarios:
        ap.error("modes are %s, scenarios %s" % (",".join(MODES), ",".join(SCENARIOS)))

    def interrupted(signo, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one is enough: we are stopping
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted("signal %d" % signo)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    os.chdir("/")

    run = Run(args)
    status = 1
    try:
        run.main()
        run.report()
        status = 0 if run.results and all(r["ok"] for r in run.results) else 1
    except HarnessError as e:
        say("ERROR: %s" % e)
        if run.cluster is not None:
            run.print_tails()
        run.report()
    except Interrupted as e:
        say("interrupted (%s): stopping everything" % e)
        status = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if run.client is not None:
            run.client.stop()
        if run.cluster is not None:
            run.cluster.stop()
        sweep(run.tmp)
    say("done in %.0fs" % (time.time() - START))
    return status


if __name__ == "__main__":
    sys.exit(main())
