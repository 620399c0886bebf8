#!/usr/bin/python3
"""The partition test: a three-node Patroni cluster (etcd, PostgreSQL 15,
fencing), each node in a network namespace of its own on a private bridge;
lease holders in their own namespace acquire leases from the cluster and write
to a separate fenced store (a plain PostgreSQL with fencing); the primary is
cut off from etcd and the other nodes with nftables while its clients and the
store still reach it.  Scenarios: async, sync (Patroni synchronous_mode), and
both with the old primary's Patroni stalled (SIGSTOP before the cut, SIGCONT
after the heal).  See test/ha/README.md.

Started by test/ha/run --test partition (test/ha/partition), which installs the
packages, makes the temporary directory and sweeps up; all state lives under
--tmp, every namespace created is listed in --tmp/netns.list.
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import psycopg2

sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
import ha  # noqa: E402  (the failover test: processes, Patroni nodes, cluster)
from ha import HarnessError, Interrupted, say, wait_until, http, pids_in, signal_pids, tail  # noqa: E402

HERE = ha.HERE
PGBIN = ha.PGBIN
SCENARIOS = ("async", "async-stalled", "sync", "sync-stalled")
NET = "10.77.0"
ADDR = {"ctl": NET + ".2", "etcd": NET + ".10", "node1": NET + ".11", "node2": NET + ".12",
        "node3": NET + ".13", "store": NET + ".20", "holders": NET + ".30"}
TTL = 3.0  # seconds, the holders' lease ttl
PROFILES = {  # seconds: holders before the cut, the cut, holders after the cluster is whole again
    "quick": dict(warm=3, cut=14, post=3),
    "default": dict(warm=4, cut=20, post=4),
    "long": dict(warm=6, cut=60, post=6),
}
PATCH = os.path.join(HERE, "patroni-3.0.2-leader-key.patch")


def run(*argv, check=True):
    r = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=ha.clean_env(), text=True)
    if check and r.returncode != 0:
        raise HarnessError("%s: exit %d: %s" % (" ".join(argv), r.returncode, r.stdout.strip()[:300]))
    return r.stdout


# ---------------------------------------------------------------- network

class Net:
    """Namespaces <prefix>-<role>, each with one veth (e0) to a bridge in the
    namespace <prefix>-br; addresses only inside them, nothing in the host's."""

    def __init__(self, tmp):
        self.prefix = "fp%d" % (os.getpid() % 100000)
        self.listfile = os.path.join(tmp, "netns.list")
        self.br = self.prefix + "-br"
        self.made = []

    def ns(self, role):
        return "%s-%s" % (self.prefix, role)

    def exec_prefix(self, role):
        return ("ip", "netns", "exec", self.ns(role))

    def add(self, name):
        run("ip", "netns", "add", name)
        self.made.append(name)
        with open(self.listfile, "a") as f:
            f.write(name + "\n")
        run("ip", "-n", name, "link", "set", "lo", "up")

    def create(self):
        self.add(self.br)
        run("ip", "-n", self.br, "link", "add", "br0", "type", "bridge")
        run("ip", "-n", self.br, "link", "set", "br0", "up")
        for i, (role, addr) in enumerate(sorted(ADDR.items())):
            name = self.ns(role)
            self.add(name)
            run("ip", "link", "add", "e0", "netns", name, "type", "veth",
                "peer", "name", "v%d" % i, "netns", self.br)
            run("ip", "-n", self.br, "link", "set", "v%d" % i, "master", "br0")
            run("ip", "-n", self.br, "link", "set", "v%d" % i, "up")
            run("ip", "-n", name, "addr", "add", addr + "/24", "dev", "e0")
            run("ip", "-n", name, "link", "set", "e0", "up")
        say("network: bridge in %s, namespaces %s-{%s}, %s.0/24" % (
            self.br, self.prefix, ",".join(sorted(ADDR)), NET))

    def enter(self, role):
        """Moves this process (one thread) into a namespace: the harness lives in ctl."""
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        fd = os.open("/run/netns/" + self.ns(role), os.O_RDONLY)
        try:
            if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
                raise HarnessError("setns(%s): errno %d" % (role, ctypes.get_errno()))
        finally:
            os.close(fd)

    def cut(self, role, peers):
        """Drops everything between role's namespace and the peers' addresses."""
        addrs = ", ".join(ADDR[p] for p in peers)
        rules = ("table inet fencing_cut {\n"
                 " chain in { type filter hook input priority 0; policy accept; ip saddr { %s } drop; }\n"
                 " chain out { type filter hook output priority 0; policy accept; ip daddr { %s } drop; }\n"
                 "}\n" % (addrs, addrs))
        path = os.path.join(os.path.dirname(self.listfile), "cut.nft")
        with open(path, "w") as f:
            f.write(rules)
        run(*self.exec_prefix(role), "nft", "-f", path)

    def heal(self, role):
        run(*self.exec_prefix(role), "nft", "delete", "table", "inet", "fencing_cut", check=False)

    def destroy(self):
        for name in reversed(self.made):
            run("ip", "netns", "del", name, check=False)
        self.made = []


# ---------------------------------------------------------------- the store

class Store:
    """A plain PostgreSQL 15 with fencing: the resource every holder writes to."""

    def __init__(self, tmp, net):
        self.dir = os.path.join(tmp, "store")
        self.data = os.path.join(self.dir, "data")
        self.log = os.path.join(self.dir, "postgres.log")
        self.net = net
        self.proc = None
        self.dsn = ("host=%s port=5432 dbname=postgres user=postgres connect_timeout=3 "
                    "application_name=fencing-partition options='-c statement_timeout=5s'" % ADDR["store"])

    def start(self):
        uid, gid = ha.pg_ids()
        os.makedirs(self.dir)
        os.chown(self.dir, uid, gid)
        os.chmod(self.dir, 0o700)
        subprocess.run([PGBIN + "/initdb", "-D", self.data, "-U", "postgres", "--auth", "trust",
                        "--no-sync", "-E", "UTF8", "--locale", "C"], cwd=self.dir, check=True,
                       stdout=subprocess.DEVNULL, env=ha.clean_env(), user="postgres", group="postgres",
                       extra_groups=[])
        with open(os.path.join(self.data, "pg_hba.conf"), "a") as f:
            f.write("host all all %s.0/24 trust\n" % NET)
        logf = open(self.log, "a")
        self.proc = subprocess.Popen(
            list(self.net.exec_prefix("store")) + [
                "setpriv", "--reuid=postgres", "--regid=postgres", "--clear-groups", "--",
                PGBIN + "/postgres", "-D", self.data, "-c", "listen_addresses=" + ADDR["store"],
                "-c", "unix_socket_directories=" + self.dir, "-c", "shared_preload_libraries=fencing",
                "-c", "fsync=off", "-c", "max_connections=50"],
            cwd=self.data, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
            env=ha.clean_env(), start_new_session=True)
        logf.close()

        def setup():
            if self.proc.poll() is not None:
                raise HarnessError("the store's postgres exited:\n" + tail(self.log, 10))
            c = psycopg2.connect(self.dsn)
            c.autocommit = True
            try:
                cur = c.cursor()
                cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
                cur.execute("CREATE TABLE IF NOT EXISTS ledger (res text PRIMARY KEY, holder text,"
                            " grant_id text, tli int, seq bigint NOT NULL DEFAULT 0)")
                cur.execute("SELECT fencing.protect('ledger')")
                # every accepted write, in the order the store accepted them (the row
                # lock orders the writes of one resource; nextval runs under it)
                cur.execute("CREATE TABLE IF NOT EXISTS ledger_audit (id bigserial PRIMARY KEY,"
                            " res text, holder text, grant_id text, tli int, token bigint,"
                            " at timestamptz DEFAULT clock_timestamp())")
                cur.execute("CREATE OR REPLACE FUNCTION ledger_audit() RETURNS trigger LANGUAGE plpgsql"
                            " AS $$BEGIN INSERT INTO ledger_audit (res, holder, grant_id, tli, token)"
                            " VALUES (NEW.res, NEW.holder, NEW.grant_id, NEW.tli, NEW.last_fencing_token);"
                            " RETURN NULL; END$$")
                cur.execute("CREATE OR REPLACE TRIGGER ledger_audit AFTER UPDATE ON ledger"
                            " FOR EACH ROW EXECUTE FUNCTION ledger_audit()")
                cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'fencing'")
                return cur.fetchone()[0]
            finally:
                c.close()
        v = wait_until("the fenced store", 60, setup, interval=0.5)
        say("fenced store: PostgreSQL with fencing %s on %s, table ledger protected" % (v, ADDR["store"]))

    def query(self, sql, args=None):
        c = psycopg2.connect(self.dsn)
        c.autocommit = True
        try:
            cur = c.cursor()
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None
        finally:
            c.close()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# ---------------------------------------------------------------- the cluster

class PCluster(ha.Cluster):
    """ha.Cluster with etcd and each node in its own namespace, fixed ports."""

    def __init__(self, tmp, net, python_path, parameters):
        super().__init__(tmp)
        self.etcd_host, self.etcd_port, self.etcd_peer = ADDR["etcd"], 2379, 2380
        self.etcd_prefix = net.exec_prefix("etcd")
        self.parameters = parameters
        self.nodes = []
        for i in range(3):
            n = ha.Node(tmp, i + 1, 5432, 8008, host=ADDR["node%d" % (i + 1)])
            n.prefix = net.exec_prefix(n.name)
            n.trusted = NET + ".0/24"
            n.python_path = python_path
            self.nodes.append(n)

    def leader_seen_by(self, nodes):
        """The read-write leader as the given nodes' Patroni see it (the majority side)."""
        for n in nodes:
            st, body = http("GET", n.api + "/cluster", timeout=1.5)
            if st != 200 or not isinstance(body, dict):
                continue
            for m in body.get("members", []):
                if m.get("role") == "leader" and m.get("state") == "running":
                    node = self.by_name(m["name"])
                    if node in nodes and not node.query("SELECT pg_is_in_recovery()")[0][0]:
                        return node
            return None
        return None


def kill_orphans(node):
    """SIGKILLs PostgreSQL processes of node that run in a removed data directory.

    Patroni 3.0.2, demoting a primary whose shutdown hangs (its walsenders wait
    for standbys it cannot reach), demotes a second time from its main thread
    and starts two postmasters; after a failed pg_rewind it removes the data
    directory and clones the new primary, but the stray postmaster still holds
    the address, so the node never comes back.  Returns how many it killed."""
    gone = node.data + " (deleted)"
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit()
            and (ha.proc_cwd(int(d)) or "").startswith(gone)]
    signal_pids(pids, signal.SIGKILL)
    return len(pids)


def patched_patroni(tmp):
    """A copy of Debian's patroni package with the upstream leader-key fix (PR #2689)."""
    lib = os.path.join(tmp, "patroni-lib")
    shutil.copytree("/usr/lib/python3/dist-packages/patroni", os.path.join(lib, "patroni"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    out = run("patch", "-p1", "-d", lib, "-i", PATCH)
    os.chmod(lib, 0o755)
    say("Patroni 3.0.2 with the leader-key fix (PR #2689) from %s: %s" % (lib, out.strip().replace("\n", "; ")))
    return lib


# ---------------------------------------------------------------- holders

class Holders:
    def __init__(self, tmp, net, cluster, store, label, resources, old, n_pinned=3, n_follow=3):
        self.dir = os.path.join(tmp, "holders")
        os.makedirs(self.dir, exist_ok=True)
        self.procs = []
        self.files = []
        follow = ("host=%s port=%s dbname=postgres user=postgres target_session_attrs=read-write "
                  % (",".join(n.host for n in cluster.nodes), ",".join("5432" for _ in cluster.nodes)))
        pinned = "host=%s port=5432 dbname=postgres user=postgres " % old.host
        common = ("connect_timeout=2 keepalives=1 keepalives_idle=1 keepalives_interval=1 "
                  "keepalives_count=2 tcp_user_timeout=2000 application_name=fencing-holder "
                  "options='-c statement_timeout=1500'")
        for i in range(n_pinned + n_follow):
            kind = "pinned" if i < n_pinned else "follow"
            name = "%s-%s%d" % (label, kind, i)
            out = os.path.join(self.dir, name + ".jsonl")
            err = open(os.path.join(self.dir, name + ".stderr"), "w")
            argv = list(net.exec_prefix("holders")) + [
                "/usr/bin/python3", "-I", os.path.join(HERE, "holder.py"), "--name", name,
                "--dsn", (pinned if kind == "pinned" else follow) + common,
                "--store", store.dsn, "--out", out, "--resources", ",".join(resources),
                "--ttl", str(TTL)] + (["--reconnect", "1.0"] if kind == "follow" else [])
            self.procs.append(subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=err,
                                               stderr=subprocess.STDOUT, env=ha.clean_env(),
                                               start_new_session=True))
            err.close()
            self.files.append(out)

    def events(self):
        out = []
        for f in self.files:
            try:
                with open(f) as fh:
                    for line in fh:
                        try:
                            out.append(json.loads(line))
                        except ValueError:
                            pass
            except FileNotFoundError:
                pass
        return out

    def check_running(self):
        for p in self.procs:
            if p.poll() is not None:
                raise HarnessError("a holder exited with status %s" % p.returncode)
        return True

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=6)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)


# ---------------------------------------------------------------- checks

def analyse(events, audit, history):
    """The figures of one scenario from the holders' events, the store's accepted
    writes (in order) and the grants the final primary's history holds."""
    grants = {}
    for e in events:
        if e["ev"] == "acquire" and e["out"] == "ok":
            grants[e["g"]] = dict(res=e["res"], tok=e["tok"], tli=e["tli"], node=e["node"],
                                  t0=e["t0"], t1=e["t1"], acks=[e["t0"]], end=None)
    for e in events:
        g = grants.get(e.get("g"))
        if g is None:
            continue
        if e["ev"] == "renew" and e["out"] == "ok":
            g["acks"].append(e["t0"])
        elif e["ev"] == "end":
            g["end"] = e["t"]
    for g in grants.values():
        # from when the holder learns of the grant (it cannot act before) until the
        # start of its last acknowledged acquire/renew + ttl, or the end it saw first
        g["belief"] = (g["t1"], min(max(g["acks"]) + TTL, g["end"] if g["end"] is not None else 1e18))
    r = dict(grants=len(grants))
    # tokens issued twice (different grants, same token)
    seen, twice = {}, 0
    for gid, g in sorted(grants.items(), key=lambda kv: kv[1]["t1"]):
        twice += g["tok"] in seen
        seen.setdefault(g["tok"], gid)
    r["twice"] = twice
    # overlaps: two grants on one resource whose holders' beliefs overlap in time
    overlaps, ex_overlap = 0, []
    byres = {}
    for gid, g in grants.items():
        byres.setdefault(g["res"], []).append((g["belief"][0], g["belief"][1], gid))
    for res, lst in byres.items():
        lst.sort()
        for i, (s1, e1, g1) in enumerate(lst):
            for s2, e2, g2 in lst[i + 1:]:
                if s2 >= e1:
                    break
                overlaps += 1
                if len(ex_overlap) < 3:
                    ex_overlap.append("overlap on %s: %s (tli %d, %s) and %s (tli %d, %s) for %.2fs" % (
                        res, g1, grants[g1]["tli"], grants[g1]["node"], g2, grants[g2]["tli"],
                        grants[g2]["node"], min(e1, e2) - s2))
    r["overlaps"] = overlaps
    # lost: acknowledged grants the final primary's history does not hold
    lost = [gid for gid, g in grants.items() if (g["res"], g["tok"]) not in history]
    r["lost"] = len(lost)
    r["lost_examples"] = ["lost grant %s on %s token %d (tli %d, %s)" % (
        gid, grants[gid]["res"], grants[gid]["tok"], grants[gid]["tli"], grants[gid]["node"])
        for gid in lost[:3]]
    # stale accepted: in the store's order, a write below a newer holder's earlier write
    stale, ex_stale, top = 0, [], {}
    for (_id, res, gid, tli, tok) in audit:
        key = (tli, tok)
        if res in top and key < top[res][0]:
            stale += 1
            if len(ex_stale) < 3 and not any(gid in x for x in ex_stale):
                ex_stale.append("store ACCEPTED %s (tli %d token %d) on %s after %s (tli %d token %d)" % (
                    gid, tli, tok, res, top[res][1], top[res][0][0], top[res][0][1]))
        if res not in top or key > top[res][0]:
            top[res] = (key, gid)
    r["stale"] = stale
    # new refused: a refused write of the newest holder known when the refusal came
    new_refused, ex_new = 0, []
    writes = [e for e in events if e["ev"] == "write"]
    r["writes_ok"] = sum(1 for w in writes if w["out"] == "ok")
    r["writes_refused"] = sum(1 for w in writes if w["out"] == "stale")
    for w in writes:
        if w["out"] != "stale" or w["g"] not in grants:
            continue
        g = grants[w["g"]]
        key = (g["tli"], g["tok"])
        newer = [(o["tli"], o["tok"]) for o in grants.values()
                 if o["res"] == g["res"] and o["t1"] <= w["t1"] and (o["tli"], o["tok"]) > key]
        if not newer:
            new_refused += 1
            if len(ex_new) < 3 and not any(w["g"] + " " in x for x in ex_new):
                ex_new.append("store REFUSED the newest holder %s (tli %d token %d, from %s) on %s" % (
                    w["g"], g["tli"], g["tok"], g["node"], g["res"]))
    r["new_refused"] = new_refused
    r["examples"] = ex_stale + ex_new + ex_overlap + r.pop("lost_examples")
    return r, grants


# ---------------------------------------------------------------- scenarios

class Run:
    def __init__(self, args):
        self.args = args
        self.tmp = os.path.realpath(args.tmp)
        self.p = dict(PROFILES[args.profile])
        if args.cut:
            self.p["cut"] = args.cut
        self.net = Net(self.tmp)
        self.store = None
        self.cluster = None
        self.holders = None
        self.results = []
        self.sync = None

    def setup(self):
        self.net.create()
        self.net.enter("ctl")
        python_path = None if self.args.patroni == "stock" else patched_patroni(self.tmp)
        params = {}
        if self.args.confirmation:
            # Standbys reply every second; a primary that heard none for 2 s
            # refuses grants and renewals (docs/ha.md).
            params["fencing.grant_confirmation"] = self.args.confirmation
            params["fencing.standby_reply_timeout"] = "2s"
            params["wal_receiver_status_interval"] = "1s"
        self.cluster = PCluster(self.tmp, self.net, python_path, params)
        self.store = Store(self.tmp, self.net)
        self.store.start()
        first_sync = self.args.scenarios[0].startswith("sync")
        self.cluster.start(sync=first_sync)
        self.sync = first_sync
        leader = self.cluster.wait_ready(first_sync, 180, "three nodes to come up")
        say("three nodes up, %s is primary" % leader.name)

        def schema():
            c = leader.connect()
            try:
                cur = c.cursor()
                cur.execute("CREATE EXTENSION IF NOT EXISTS fencing")
                # every grant and renewal the cluster commits, replicated with it: an
                # acknowledged grant missing here on the final primary was lost
                cur.execute("CREATE TABLE IF NOT EXISTS grant_audit (resource text, holder text,"
                            " token bigint, expires_at timestamptz)")
                cur.execute("CREATE OR REPLACE FUNCTION public.grant_audit() RETURNS trigger"
                            " LANGUAGE plpgsql AS $$BEGIN INSERT INTO public.grant_audit VALUES"
                            " (NEW.resource, NEW.holder, NEW.token, NEW.expires_at); RETURN NULL; END$$")
                cur.execute("CREATE OR REPLACE TRIGGER grant_audit AFTER INSERT OR UPDATE"
                            " ON fencing.resources FOR EACH ROW EXECUTE FUNCTION public.grant_audit()")
                cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'fencing'")
                return cur.fetchone()[0]
            finally:
                c.close()
        v = wait_until("CREATE EXTENSION fencing on the cluster", 60, schema, interval=2)
        say("fencing %s on the cluster; grants audited in grant_audit" % v)

    def scenario(self, scen):
        p, cl, net = self.p, self.cluster, self.net
        sync = scen.startswith("sync")
        stalled = scen.endswith("stalled")
        res = dict(scenario=scen, ok=False, error=None, notes=[])
        self.results.append(res)
        if self.sync != sync:
            cl.wait_ready(self.sync, 150)
            cl.set_sync_mode(sync)
            self.sync = sync
            say("synchronous_mode set to %s" % sync)
        old = cl.wait_ready(sync, 150)
        others = [n for n in cl.nodes if n is not old]
        resources = ["%s:r%d" % (scen, i) for i in range(3)]
        self.store.query("INSERT INTO ledger (res, last_fencing_token) SELECT unnest(%s::text[]), 1",
                         (resources,))
        say("%s: primary %s (%s); 3 holders pinned to it, 3 following the read-write primary"
            % (scen, old.name, old.host))
        self.holders = h = Holders(self.tmp, net, cl, self.store, "%d-%s" % (len(self.results), scen),
                                   resources, old)
        t0 = time.time()
        wait_until("holders' first grants", 60, lambda: h.check_running() and time.time() - t0 >= p["warm"]
                   and any(e["ev"] == "acquire" and e["out"] == "ok" for e in h.events()))
        patroni = []
        if stalled:
            patroni = pids_in(old.dir, exact=True)
            signal_pids(patroni, signal.SIGSTOP)
            say("SIGSTOP of %s's Patroni (pid %s)" % (old.name, ",".join(map(str, patroni))))
        net.cut(old.name, ["etcd"] + [n.name for n in others])
        t_cut = time.time()
        say("cut: %s isolated from etcd, %s for %ss (its holders and the store still reach it)"
            % (old.name, ", ".join(n.name for n in others), p["cut"]))
        new, t_new = None, None
        while time.time() - t_cut < p["cut"]:
            h.check_running()
            if new is None:
                try:
                    new = cl.leader_seen_by(others)
                except (OSError, psycopg2.Error):
                    new = None
                if new is not None:
                    t_new = time.time()
                    say("%s: new primary %s after %.1fs of cut" % (scen, new.name, t_new - t_cut))
            time.sleep(0.5)
        old_rw = None
        try:
            old_rw = not old.query("SELECT pg_is_in_recovery()")[0][0]
        except psycopg2.Error:
            pass
        net.heal(old.name)
        t_heal = time.time()
        if stalled:
            signal_pids(patroni, signal.SIGCONT)
        say("healed after %.1fs%s; the old primary %s was %s at the end of the cut" % (
            t_heal - t_cut, " and SIGCONT of its Patroni" if stalled else "", old.name,
            "still read-write" if old_rw else ("read-only" if old_rw is False else "unreachable")))
        res["notes"].append("new primary: %s" % ("%s after %.1fs of cut" % (new.name, t_new - t_cut)
                                                 if new else "none during the cut"))
        res["notes"].append("old primary %s at the end of the cut: %s" % (
            old.name, "still read-write" if old_rw else ("read-only" if old_rw is False else "unreachable")))
        orphans = [0]

        def whole():
            n = kill_orphans(old)
            if n:
                orphans[0] += n
                say("killed %d PostgreSQL processes of %s left in its removed data directory" % (n, old.name))
            return cl.ready(sync)
        try:
            final = wait_until("the cluster to be whole again", 60, whole, interval=0.5)
        except HarnessError as e:
            say("%s; asking Patroni to reinitialize %s" % (e, old.name))
            http("POST", old.api + "/reinitialize", {"force": True}, timeout=10)
            final = wait_until("%s to rejoin after reinitialize" % old.name, 120, whole, interval=0.5)
            res["notes"].append("%s had to be reinitialized" % old.name)
        if orphans[0]:
            res["notes"].append("killed %d processes of a second postmaster Patroni had started on %s"
                                " (its double demotion), left in its removed data directory"
                                % (orphans[0], old.name))
        say("%s: whole again after %.1fs, primary %s" % (scen, time.time() - t_heal, final.name))
        # the holders go on; then the cluster must still be whole, and its primary
        # then is the history every acknowledged grant must be in
        time.sleep(p["post"])
        settled = cl.wait_ready(sync, 60, "the cluster to stay whole")
        if settled is not final:
            say("%s: the primary moved from %s to %s after the heal" % (scen, final.name, settled.name))
            final = settled
        res["notes"].append("after the heal: primary %s%s" % (
            final.name, " (the new primary %s was DEMOTED)" % new.name if new and final is not new else ""))
        h.stop()
        self.holders = None
        events = h.events()
        audit = self.store.query("SELECT id, res, grant_id, tli, token FROM ledger_audit"
                                 " WHERE res = ANY(%s) ORDER BY id", (resources,))
        history = set(final.query("SELECT resource, token FROM grant_audit WHERE resource = ANY(%s)",
                                  (resources,)))
        r, grants = analyse(events, audit, history)
        res.update(r)
        during = [g for g in grants.values() if t_cut <= g["t1"] <= t_heal]
        for node in cl.nodes:
            mine = [g for g in during if g["node"] == node.host]
            if mine:
                res["notes"].append("%d grants by %s during the cut (tli %s, tokens %d..%d)" % (
                    len(mine), node.name, ",".join(sorted({str(g["tli"]) for g in mine})),
                    min(g["tok"] for g in mine), max(g["tok"] for g in mine)))
        errs = {}
        for e in events:
            if e.get("out") == "error":
                k = "%s %s" % (e["ev"], (e.get("err") or e.get("code") or "?")[:40])
                errs[k] = errs.get(k, 0) + 1
        res["notes"].append("errors: " + (", ".join("%s x%d" % kv for kv in sorted(errs.items(),
                                                                                     key=lambda kv: -kv[1])[:5])
                                           or "none"))
        res["notes"] += r["examples"]
        # Synchronous replication: nothing acknowledged is lost, no overlap.
        # fencing.grant_confirmation bounds how long a cut-off primary grants,
        # so no overlap either; asynchronous replication may still lose the
        # grants of the last moment before the cut (docs/ha.md).
        res["ok"] = (r["stale"] == 0 and r["new_refused"] == 0 and r["twice"] == 0 and r["grants"] > 0
                     and (not sync or r["lost"] == 0)
                     and (not (sync or self.args.confirmation) or r["overlaps"] == 0))

    def main(self):
        broken = None
        try:
            self.setup()
        except HarnessError as e:
            broken = "setting up failed: %s" % e
            say("ERROR: " + broken)
            self.print_tails()
        for scen in self.args.scenarios:
            if broken:
                self.results.append(dict(scenario=scen, ok=False, error="not run: " + broken, notes=[]))
            else:
                try:
                    self.scenario(scen)
                except HarnessError as e:
                    self.results[-1].update(ok=False, error=str(e))
                    say("ERROR in %s: %s" % (scen, e))
                    self.print_tails()
                    if self.holders is not None:
                        self.holders.stop()
                        self.holders = None
                    for n in self.cluster.nodes:
                        self.net.heal(n.name)
                    try:
                        self.cluster.revive()
                        self.cluster.wait_ready(self.sync, 150, "the cluster to recover")
                    except HarnessError as e2:
                        broken = "%s failed and the cluster did not recover: %s" % (scen, e2)
            print("test partition_%s ... %s" % (scen, "ok" if self.results[-1]["ok"] else "FAILED"), flush=True)

    def print_tails(self):
        if self.cluster is None:
            return
        print("----- etcd log (tail)\n" + tail(self.cluster.etcd_log, 8), file=sys.stderr)
        for n in self.cluster.nodes:
            print("----- %s (tail)\n%s" % (n.name, tail(n.log, 30)), file=sys.stderr)
        sys.stderr.flush()

    def report(self):
        head = ["scenario", "grants", "store writes ok/refused", "stale accepted", "new refused",
                "tokens twice", "lost grants", "overlaps"]
        rows = []
        for r in self.results:
            c = lambda k: "-" if r.get(k) is None else str(r[k])
            async_note = lambda k: c(k) + (" (async)" if not r["scenario"].startswith("sync")
                                            and r.get(k) and (k == "lost" or not self.args.confirmation)
                                            else "")
            rows.append([r["scenario"], c("grants"),
                         "-" if r.get("writes_ok") is None else "%d/%d" % (r["writes_ok"], r["writes_refused"]),
                         c("stale"), c("new_refused"), c("twice"), async_note("lost"), async_note("overlaps")])
        widths = [max(len(x) for x in col) for col in zip(head, *rows)]
        line = lambda cells: "| " + " | ".join(x.ljust(w) for x, w in zip(cells, widths)) + " |"
        print()
        print(line(head))
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for row in rows:
            print(line(row))
        print()
        print("Patroni: %s; cut %ss; lease ttl %ss; fencing.grant_confirmation: %s" % (
            "stock 3.0.2" if self.args.patroni == "stock" else "3.0.2 + leader-key fix (PR #2689)",
            self.p["cut"], TTL, self.args.confirmation or "not set"))
        for r in self.results:
            print("%s: %s" % (r["scenario"], "ok" if r["ok"] else "FAILED"))
            if r.get("error"):
                print("    error: " + r["error"])
            for n in r["notes"]:
                print("    " + n)
        sys.stdout.flush()

    def stop(self):
        if self.holders is not None:
            self.holders.stop()
        if self.cluster is not None:
            self.cluster.stop()
        if self.store is not None:
            self.store.stop()
        ha.sweep(self.tmp)
        self.net.destroy()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tmp", required=True)
    ap.add_argument("--profile", choices=sorted(PROFILES), default="default")
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--cut", type=float, default=None, help="seconds the primary is cut off")
    ap.add_argument("--patroni", choices=("fixed", "stock"), default="fixed")
    ap.add_argument("--confirmation", choices=("standby", "synchronous"), default=None)
    args = ap.parse_args()
    args.scenarios = [s for s in args.scenarios.split(",") if s]
    if not args.scenarios or not set(args.scenarios) <= set(SCENARIOS):
        ap.error("scenarios are %s" % ",".join(SCENARIOS))

    def interrupted(signo, _frame):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        raise Interrupted("signal %d" % signo)
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)
    os.chdir("/")
    r = Run(args)
    status = 1
    try:
        r.main()
        r.report()
        status = 0 if r.results and all(x["ok"] for x in r.results) else 1
    except HarnessError as e:
        say("ERROR: %s" % e)
        r.print_tails()
        r.report()
    except Interrupted as e:
        say("interrupted (%s): stopping everything" % e)
        status = 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        r.stop()
    say("done in %.0fs" % (time.time() - ha.START))
    return status


if __name__ == "__main__":
    sys.exit(main())
