package io.github.fencing.conformance;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import com.fasterxml.jackson.databind.ObjectMapper;

import io.github.fencing.ConnectionSource;
import io.github.fencing.Election;
import io.github.fencing.Fencing;
import io.github.fencing.FencingTokenException;
import io.github.fencing.Lease;
import io.github.fencing.LeaseAlreadyHeldException;
import io.github.fencing.LeaseBusyException;
import io.github.fencing.LeaseLostException;
import io.github.fencing.LeaseOptions;
import io.github.fencing.LeaseTimeoutException;
import io.github.fencing.MissingTokenException;
import io.github.fencing.Session;
import io.github.fencing.SqlFunction;
import io.github.fencing.StaleTokenException;

/**
 * The Java worker of the client conformance suite (clients/conformance/PROTOCOL.md): JSON
 * requests on stdin (Jackson), one JSON answer a line on stdout. A test class: not in the
 * client's jar.
 */
public final class Worker {
    private static final ObjectMapper JSON = new ObjectMapper();
    private final ConnectionSource source = ConnectionSource.fromEnvironment();
    private final Map<String, CompletableFuture<Lease>> pending = new HashMap<>();
    private final Map<String, Election> elections = new HashMap<>();
    private final Map<String, List<Map<String, Object>>> events = new HashMap<>();
    private Connection work;
    private final Map<String, Lease> leases = new HashMap<>();
    private final Map<String, Session> sessions = new HashMap<>();
    private final List<Lease> replaced = new ArrayList<>();
    private final AtomicLong callbacks = new AtomicLong();

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), false, StandardCharsets.UTF_8);
        System.setOut(System.err); // nothing but answers on stdout
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        Worker w = new Worker();
        w.warmUp();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            Map<String, Object> answer;
            boolean quit = false;
            try {
                @SuppressWarnings("unchecked")
                Map<String, Object> request = JSON.readValue(line, Map.class);
                quit = "quit".equals(request.get("op"));
                answer = w.handle(request);
            } catch (Exception | Error e) {
                answer = error(e);
            }
            out.println(JSON.writeValueAsString(answer));
            out.flush();
            if (quit) {
                break;
            }
        }
        w.releaseAll();
        out.flush();
        System.exit(0);
    }

    private Map<String, Object> handle(Map<String, Object> r) throws Exception {
        String op = String.valueOf(r.get("op"));
        Map<String, Object> a = ok();
        switch (op) {
            case "lease" -> {
                String resource = str(r, "resource");
                Lease l = Lease.acquire(source, resource, holder(r, "holder"), seconds(r.get("ttl")), seconds(r.get("wait")));
                keep(l);
                a.put("token", l.token());
                a.put("holder", l.holder());
            }
            case "lease_async" -> {
                String resource = str(r, "resource");
                pending.put(resource, Lease.acquireAsync(source, resource, holder(r, "holder"), seconds(r.get("ttl")),
                        seconds(r.get("wait"))));
            }
            case "await_lease" -> {
                CompletableFuture<Lease> f = pending(r);
                Lease l;
                try {
                    l = f.get(seconds(r.get("timeout")).toNanos(), TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    throw new Answer("pending");
                } catch (CancellationException e) {
                    throw new Answer("cancelled");
                } catch (ExecutionException e) {
                    throw e.getCause() instanceof Exception x ? x : e;
                }
                if (!leases.containsValue(l)) {
                    keep(l);
                }
                a.put("token", l.token());
                a.put("holder", l.holder());
            }
            case "cancel" -> {
                CompletableFuture<Lease> f = pending(r);
                boolean cancelled = f.cancel(true); // returns once the server's call has ended
                a.put("cancelled", cancelled);
            }
            case "do" -> {
                String resource = str(r, "resource");
                String sql = str(r, "sql");
                Duration hold = seconds(r.get("hold"));
                LeaseOptions options = LeaseOptions.of(seconds(r.get("ttl"))).holder(holder(r, "holder"));
                long[] out = Fencing.withLease(source, resource, options, lease -> {
                    long rows = Fencing.fenced(work(), lease, c -> execute(c, sql), e -> callbacks.incrementAndGet());
                    try {
                        lease.lost().get(hold.toNanos(), TimeUnit.NANOSECONDS);
                    } catch (TimeoutException | CancellationException | ExecutionException e) {
                        // held for the whole hold (a loss ends the call with LeaseLostException)
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    return new long[] {lease.token(), rows};
                });
                a.put("token", out[0]);
                a.put("rows", out[1]);
            }
            case "write_hold" -> {
                String sql = str(r, "sql");
                long holdMillis = seconds(r.get("hold")).toMillis();
                long rows;
                try {
                    rows = Fencing.fenced(work(), lease(r), c -> {
                        long n = execute(c, sql);
                        try {
                            Thread.sleep(holdMillis); // inside the open transaction
                        } catch (InterruptedException e) {
                            Thread.currentThread().interrupt();
                        }
                        return n;
                    }, e -> callbacks.incrementAndGet());
                } catch (SQLException e) {
                    dropWorkIfBroken(e);
                    throw e;
                }
                a.put("rows", rows);
            }
            case "campaign" -> {
                Election e = election(r, seconds(r.get("ttl")), Boolean.TRUE.equals(r.get("recampaign")), holder(r, "candidate"));
                e.campaignAsync(Lease.FOREVER);
                a.put("candidate", e.candidate());
            }
            case "election_status" -> {
                Election e = existing(r);
                a.put("leader", e.isLeader());
                a.put("token", e.token());
            }
            case "await_leader" -> {
                Election e = existing(r);
                long end = System.nanoTime() + seconds(r.get("timeout")).toNanos();
                synchronized (e) {
                    while (!e.isLeader() && end - System.nanoTime() > 0) {
                        TimeUnit.NANOSECONDS.timedWait(e, Math.min(end - System.nanoTime(), 50_000_000L));
                    }
                }
                a.put("leader", e.isLeader());
                a.put("token", e.token());
            }
            case "observe" -> {
                Election e = elections.containsKey(str(r, "election")) ? existing(r)
                        : election(r, Duration.ofSeconds(10), false, null);
                e.observe();
            }
            case "events" -> {
                List<Map<String, Object>> list = events.getOrDefault(str(r, "election"), new ArrayList<>());
                synchronized (list) {
                    a.put("events", new ArrayList<>(list));
                }
            }
            case "current_leader" -> {
                Election e = elections.containsKey(str(r, "election")) ? existing(r)
                        : election(r, Duration.ofSeconds(10), false, null);
                var leader = e.leader();
                a.put("holder", leader.map(Election.Leader::holder).orElse(null));
                a.put("token", leader.map(Election.Leader::token).orElse(null));
            }
            case "resign" -> {
                a.put("resigned", existing(r).resign());
            }
            case "session" -> {
                Session s = Session.open(source, holder(r, "holder"));
                List<Object> tokens = new ArrayList<>();
                try {
                    Duration ttl = seconds(r.get("ttl"));
                    for (Object resource : (List<?>) r.get("resources")) {
                        Lease l = s.lease((String) resource, ttl);
                        tokens.add(l.token());
                    }
                } catch (Exception e) {
                    try {
                        s.close();
                    } catch (SQLException suppressed) {
                        e.addSuppressed(suppressed);
                    }
                    throw e;
                }
                for (Lease l : s.leases()) {
                    Lease old = leases.put(l.resource(), l);
                    if (old != null) {
                        replaced.add(old);
                    }
                    sessions.put(l.resource(), s);
                }
                a.put("tokens", tokens);
            }
            case "status" -> {
                Lease l = lease(r);
                a.put("token", l.token());
                a.put("lost", l.isLost());
                a.put("remaining", l.remaining().toNanos() / 1e9);
            }
            case "await_lost" -> {
                Lease l = lease(r);
                boolean lost;
                try {
                    l.lost().get(seconds(r.get("timeout")).toNanos(), TimeUnit.NANOSECONDS);
                    lost = true;
                } catch (TimeoutException | CancellationException e) {
                    lost = l.isLost();
                } catch (ExecutionException e) {
                    lost = true;
                }
                a.put("lost", lost);
            }
            case "write" -> {
                String sql = str(r, "sql");
                SqlFunction<Long> body = c -> execute(c, sql);
                long rows;
                try {
                    if (r.get("election") != null) {
                        rows = Fencing.fenced(work(), existing(r), body);
                    } else if (r.get("resource") != null) {
                        rows = Fencing.fenced(work(), lease(r), body, e -> callbacks.incrementAndGet());
                    } else if (r.get("token") != null) {
                        rows = Fencing.fenced(work(), ((Number) r.get("token")).longValue(), body,
                                e -> callbacks.incrementAndGet());
                    } else {
                        rows = plain(work(), body);
                    }
                } catch (SQLException e) {
                    dropWorkIfBroken(e);
                    throw e;
                }
                a.put("rows", rows);
            }
            case "release" -> {
                String resource = str(r, "resource");
                Lease l = lease(r);
                boolean released = l.release();
                leases.remove(resource);
                Session s = sessions.remove(resource);
                if (s != null) {
                    sessions.values().removeIf(x -> x == s);
                    leases.values().removeIf(x -> s.leases().contains(x));
                    s.close();
                }
                a.put("released", released);
            }
            case "raise_inside" -> {
                long[] token = new long[1];
                try (Lease l = Lease.acquire(source, str(r, "resource"), holder(r, "holder"), seconds(r.get("ttl")))) {
                    token[0] = l.token();
                    throw new IllegalStateException("raised inside the lease's scope");
                } catch (IllegalStateException expected) {
                    // caught outside the scope, after the lease was released
                }
                a.put("token", token[0]);
            }
            case "stale_count" -> {
                a.put("count", Fencing.staleRefusals());
                a.put("callbacks", callbacks.get());
            }
            case "quit" -> {
            }
            default -> throw new IllegalArgumentException("unknown op " + op);
        }
        return a;
    }

    /**
     * Loads the driver and the client's classes and opens the work connection before the first
     * request, so that a request is answered in the time the client takes, not the JVM's class
     * loading (the order in which waiters reach the server is the order of their requests).
     */
    private void warmUp() {
        try {
            Class.forName(Lease.class.getName(), true, Worker.class.getClassLoader());
            Class.forName(Session.class.getName(), true, Worker.class.getClassLoader());
            Class.forName(Fencing.class.getName(), true, Worker.class.getClassLoader());
            JSON.writeValueAsString(JSON.readValue("{\"op\":\"warm\",\"n\":[1,2.5,null,true]}", Map.class));
            try (Statement st = work().createStatement(); ResultSet rs = st.executeQuery("SELECT 1")) {
                rs.next();
            }
        } catch (Exception e) {
            System.err.println("conformance-worker: warm-up: " + e);
        }
    }

    private void keep(Lease l) {
        Lease old = leases.put(l.resource(), l);
        if (old != null) {
            replaced.add(old);
        }
    }

    private CompletableFuture<Lease> pending(Map<String, Object> r) {
        CompletableFuture<Lease> f = pending.get(str(r, "resource"));
        if (f == null) {
            throw new IllegalArgumentException("no lease_async on " + r.get("resource") + " in this worker");
        }
        return f;
    }

    /** The worker's election E, made with a listener that records its callbacks. */
    private Election election(Map<String, Object> r, Duration ttl, boolean recampaign, String candidate) {
        String name = str(r, "election");
        Election old = elections.get(name);
        if (old != null) {
            return old;
        }
        Election e = new Election(source, name, candidate, ttl, recampaign);
        List<Map<String, Object>> list = events.computeIfAbsent(name, k -> new ArrayList<>());
        e.listener(new Election.Listener() {
            @Override
            public void onStartedLeading(long token) {
                record(list, "started", e.candidate(), token);
                synchronized (e) {
                    e.notifyAll();
                }
            }

            @Override
            public void onStoppedLeading() {
                record(list, "stopped", e.candidate(), null);
            }

            @Override
            public void onNewLeader(String holder, Long token) {
                record(list, "new_leader", holder, token);
            }
        });
        elections.put(name, e);
        return e;
    }

    private static void record(List<Map<String, Object>> list, String kind, String holder, Long token) {
        Map<String, Object> ev = new LinkedHashMap<>();
        ev.put("kind", kind);
        ev.put("holder", holder);
        ev.put("token", token);
        synchronized (list) {
            list.add(ev);
        }
    }

    private Election existing(Map<String, Object> r) {
        Election e = elections.get(str(r, "election"));
        if (e == null) {
            throw new IllegalArgumentException("no election " + r.get("election") + " in this worker");
        }
        return e;
    }

    private Lease lease(Map<String, Object> r) {
        String resource = str(r, "resource");
        Lease l = leases.get(resource);
        if (l == null) {
            throw new IllegalArgumentException("no lease on " + resource + " in this worker");
        }
        return l;
    }

    private Connection work() throws SQLException {
        if (work != null && !work.isValid(5)) {
            // Broken since the last request (a restart, a terminated backend): open another.
            try {
                work.close();
            } catch (SQLException ignored) {
                // broken anyway
            }
            work = null;
        }
        if (work == null) {
            work = source.connect();
        }
        return work;
    }

    private void dropWorkIfBroken(SQLException e) {
        String state = e.getSQLState();
        boolean broken = state != null && (state.startsWith("08") || state.startsWith("57P"));
        try {
            broken |= work != null && work.isClosed();
        } catch (SQLException ignored) {
            broken = true;
        }
        if (broken && work != null) {
            try {
                work.close();
            } catch (SQLException ignored) {
                // broken anyway
            }
            work = null;
        }
    }

    /** Q in a plain transaction, without a token; 23T01/23T02 as the client's exceptions. */
    private static long plain(Connection c, SqlFunction<Long> body) throws SQLException {
        boolean autoCommit = c.getAutoCommit();
        c.setAutoCommit(false);
        try {
            long rows = body.apply(c);
            c.commit();
            return rows;
        } catch (SQLException e) {
            try {
                c.rollback();
            } catch (SQLException suppressed) {
                e.addSuppressed(suppressed);
            }
            throw Fencing.translate(e);
        } finally {
            try {
                c.setAutoCommit(autoCommit);
            } catch (SQLException ignored) {
                // a broken connection: dropped by the caller
            }
        }
    }

    /** Runs Q (one or more statements): the rows it changed or returned. */
    private static long execute(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement()) {
            boolean isResult = st.execute(sql);
            long rows = 0;
            while (true) {
                if (isResult) {
                    try (ResultSet rs = st.getResultSet()) {
                        while (rs.next()) {
                            rows++;
                        }
                    }
                } else {
                    int n = st.getUpdateCount();
                    if (n == -1) {
                        break;
                    }
                    rows += n;
                }
                isResult = st.getMoreResults();
            }
            return rows;
        }
    }

    private void releaseAll() {
        for (CompletableFuture<Lease> f : pending.values()) {
            f.cancel(true);
        }
        for (Election e : elections.values()) {
            try {
                e.close();
            } catch (Exception x) {
                System.err.println("conformance-worker: closing " + e + " failed: " + x);
            }
        }
        List<Lease> all = new ArrayList<>(leases.values());
        all.addAll(replaced);
        for (Lease l : all) {
            try {
                l.release();
            } catch (Exception e) {
                System.err.println("conformance-worker: release of " + l + " failed: " + e);
            }
        }
        for (Session s : new ArrayList<>(sessions.values())) {
            try {
                s.close();
            } catch (Exception e) {
                System.err.println("conformance-worker: closing " + s + " failed: " + e);
            }
        }
        leases.clear();
        sessions.clear();
    }

    /** An "Other" answer whose message is the protocol's word ("pending"). */
    private static final class Answer extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Answer(String message) {
            super(message);
        }
    }

    private static Map<String, Object> ok() {
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("ok", true);
        return a;
    }

    private static Map<String, Object> error(Throwable e) {
        Map<String, Object> a = new LinkedHashMap<>();
        a.put("ok", false);
        String name;
        if (e instanceof StaleTokenException) {
            name = "StaleToken";
        } else if (e instanceof MissingTokenException) {
            name = "MissingToken";
        } else if (e instanceof LeaseLostException) {
            name = "LeaseLost";
        } else if (e instanceof LeaseTimeoutException) {
            name = "LeaseTimeout";
        } else if (e instanceof LeaseBusyException) {
            name = "LeaseBusy";
        } else if (e instanceof LeaseAlreadyHeldException) {
            name = "LeaseAlreadyHeld";
        } else {
            name = "Other";
        }
        a.put("error", name);
        a.put("message", name.equals("Other") && !(e instanceof Answer) ? e.getClass().getName() + ": " + e.getMessage()
                : e.getMessage());
        if (e instanceof FencingTokenException f) {
            a.put("table", f.table());
            a.put("column", f.column());
            a.put("constraint", f.constraint());
            a.put("key", f.key());
            a.put("presented", f.presented());
            a.put("stored", f.stored());
        }
        if (name.equals("Other")) {
            System.err.println("conformance-worker: " + e);
        }
        return a;
    }

    private static String str(Map<String, Object> r, String key) {
        Object v = r.get(key);
        if (!(v instanceof String s)) {
            throw new IllegalArgumentException("\"" + key + "\" must be a string");
        }
        return s;
    }

    /** A holder: a string, or null/absent for the client's default identity. */
    private static String holder(Map<String, Object> r, String key) {
        Object v = r.get(key);
        if (v != null && !(v instanceof String)) {
            throw new IllegalArgumentException("\"" + key + "\" must be a string or null");
        }
        return (String) v;
    }

    /** Seconds as a Duration; "forever" is Lease.FOREVER; null stays null. */
    private static Duration seconds(Object v) {
        if (v == null) {
            return null;
        }
        if ("forever".equals(v)) {
            return Lease.FOREVER;
        }
        return Duration.ofNanos(Math.round(((Number) v).doubleValue() * 1e9));
    }
}
