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
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicLong;

import io.github.fencing.ConnectionSource;
import io.github.fencing.Fencing;
import io.github.fencing.FencingTokenException;
import io.github.fencing.Lease;
import io.github.fencing.LeaseAlreadyHeldException;
import io.github.fencing.LeaseLostException;
import io.github.fencing.LeaseTimeoutException;
import io.github.fencing.MissingTokenException;
import io.github.fencing.Session;
import io.github.fencing.SqlFunction;
import io.github.fencing.StaleTokenException;

/**
 * The Java worker of the client conformance suite (clients/conformance/PROTOCOL.md): JSON
 * requests on stdin, one JSON answer a line on stdout. Not part of the client's API.
 */
public final class Worker {
    private final ConnectionSource source = ConnectionSource.fromEnvironment();
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
                Map<String, Object> request = (Map<String, Object>) Json.parse(line);
                quit = "quit".equals(request.get("op"));
                answer = w.handle(request);
            } catch (Exception | Error e) {
                answer = error(e);
            }
            out.println(Json.write(answer));
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
                Lease l = Lease.acquire(source, resource, str(r, "holder"), seconds(r.get("ttl")), seconds(r.get("wait")));
                Lease old = leases.put(resource, l);
                if (old != null) {
                    replaced.add(old);
                }
                a.put("token", l.token());
            }
            case "session" -> {
                Session s = Session.open(source, str(r, "holder"));
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
                    if (r.get("resource") != null) {
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
                try (Lease l = Lease.acquire(source, str(r, "resource"), str(r, "holder"), seconds(r.get("ttl")))) {
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
            Json.write(Json.parse("{\"op\":\"warm\",\"n\":[1,2.5,null,true]}"));
            try (Statement st = work().createStatement(); ResultSet rs = st.executeQuery("SELECT 1")) {
                rs.next();
            }
        } catch (Exception e) {
            System.err.println("conformance-worker: warm-up: " + e);
        }
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
        } else if (e instanceof LeaseAlreadyHeldException) {
            name = "LeaseAlreadyHeld";
        } else {
            name = "Other";
        }
        a.put("error", name);
        a.put("message", name.equals("Other") ? e.getClass().getName() + ": " + e.getMessage() : e.getMessage());
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

    private static Duration seconds(Object v) {
        if (v == null) {
            return null;
        }
        return Duration.ofNanos(Math.round(((Number) v).doubleValue() * 1e9));
    }
}
